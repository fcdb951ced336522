import { describe, expect, it } from "vitest";

import { filtersToSearch, parseFilters, toQuery } from "../src/filters.js";
import { match } from "../src/router.js";
import { curlSnippet, pythonSnippet } from "../src/snippets.js";
import { formatDuration, formatTime, parseInstant } from "../src/time.js";
import { nextPath } from "../src/pages/SignIn.js";
import { phases } from "../src/components/Waterfall.js";
import { matchLines } from "../src/components/LogView.js";
import { logLines } from "../src/tail.js";
import { keyStatus } from "../src/pages/Keys.js";

describe("job filters in the URL", () => {
  it("round-trips every filter in a stable order", () => {
    const search =
      "?state=running&kind=rollout&caller=agent-7&profile=cpu-small&id_prefix=3f2a&created_after=2026-12-01T00%3A00%3A00.000Z&limit=25&cursor=0a1b2c3d-0000-4000-8000-000000000001";
    const f = parseFilters(search);
    expect(f).toEqual({
      state: "running",
      kind: "rollout",
      caller: "agent-7",
      profile: "cpu-small",
      id_prefix: "3f2a",
      created_after: "2026-12-01T00:00:00.000Z",
      limit: 25,
      cursor: "0a1b2c3d-0000-4000-8000-000000000001",
    });
    expect(filtersToSearch(f)).toBe(search);
  });

  it("drops values the API would refuse", () => {
    expect(parseFilters("?state=exploded&kind=x&limit=500&id_prefix=xyz&range=2y&created_after=soon")).toEqual({});
  });

  it("turns a relative range into created_after at query time", () => {
    const now = Date.parse("2026-12-01T12:00:00Z");
    expect(toQuery(parseFilters("?range=1h&caller=a"), now)).toEqual({
      caller: "a",
      created_after: "2026-12-01T11:00:00.000Z",
    });
  });
});

describe("routes", () => {
  it("maps console paths to pages", () => {
    expect(match("/console/")).toEqual({ name: "jobs" });
    expect(match("/console")).toEqual({ name: "jobs" });
    expect(match("/console/jobs/abc")).toEqual({ name: "job", id: "abc" });
    expect(match("/console/pods/pod%2F1")).toEqual({ name: "pod", id: "pod/1" });
    expect(match("/console/keys/")).toEqual({ name: "keys" });
    expect(match("/console/jobs/a/b")).toEqual({ name: "not-found" });
    expect(match("/console/nope")).toEqual({ name: "not-found" });
  });

  it("only follows ?next= inside the console", () => {
    expect(nextPath("?next=%2Fconsole%2Fjobs%3Fstate%3Drunning")).toBe("/console/jobs?state=running");
    expect(nextPath("?next=https%3A%2F%2Fevil.example%2F")).toBe("/console/jobs");
    expect(nextPath("?next=%2F%2Fevil.example")).toBe("/console/jobs");
    expect(nextPath("?next=%2Fconsole%2Fsignin")).toBe("/console/jobs");
  });
});

describe("time", () => {
  it("formats in UTC and local time", () => {
    expect(formatTime("2026-12-01T14:27:09.5Z", "utc")).toBe("2026-12-01 14:27:09Z");
    const local = formatTime("2026-12-01T14:27:09Z", "local");
    expect(local).toMatch(/^2026-12-0[12] \d\d:27:09$/);
    expect(formatTime(null, "utc")).toBe("—");
  });

  it("reads what people type, in the chosen zone", () => {
    expect(parseInstant("2026-12-01 14:00", "utc")).toBe("2026-12-01T14:00:00.000Z");
    expect(parseInstant("2026-12-01T14:00:00+01:00", "local")).toBe("2026-12-01T13:00:00.000Z");
    expect(parseInstant("2026-12-01 14:00", "local")).toBe(new Date(2026, 11, 1, 14, 0).toISOString());
    expect(parseInstant("tomorrow", "utc")).toBeNull();
  });

  it("formats durations", () => {
    expect(formatDuration(812)).toBe("812 ms");
    expect(formatDuration(4200)).toBe("4.2 s");
    expect(formatDuration(200_000)).toBe("3 min 20 s");
    expect(formatDuration(null)).toBe("—");
  });
});

describe("snippets", () => {
  it("copy as curl reads the key from the environment, never inlines one", () => {
    const s = curlSnippet("http://127.0.0.1:8080", "abc", false);
    expect(s).toContain("curl -s http://127.0.0.1:8080/v1/jobs/abc -H \"Authorization: Bearer $HEARTH_API_KEY\"");
    expect(s).toContain("curl -N http://127.0.0.1:8080/v1/jobs/abc/events");
    expect(s).toContain("-X POST http://127.0.0.1:8080/v1/jobs/abc/cancel");
    expect(curlSnippet("http://h", "abc", true)).not.toContain("cancel");
    expect(s).not.toContain("hk_");
  });

  it("with the job's request, both submit the same job again", () => {
    const request = { kind: "tool_call", command: ["sh", "-c", "echo 'hi'"], input: { x: 1 } };
    const curl = curlSnippet("http://h", "abc", true, request);
    expect(curl).toContain("curl -s -X POST 'http://h/v1/jobs?wait=60'");
    // Single quotes in the body survive the shell.
    expect(curl).toContain(`-d '{"kind":"tool_call","command":["sh","-c","echo '\\''hi'\\''"],"input":{"x":1}}'`);
    const py = pythonSnippet("http://h", "abc", true, request);
    expect(py).toContain("from hearth_client.models import CreateJob");
    expect(py).toContain(`CreateJob.from_dict(json.loads(${JSON.stringify(JSON.stringify(request))}))`);
    expect(pythonSnippet("http://h", "abc", true)).not.toContain("CreateJob");
  });

  it("copy as Python uses the SDK's helpers", () => {
    const s = pythonSnippet("http://h:1", "abc", true);
    expect(s).toContain('client = hearth.connect("http://h:1", os.environ["HEARTH_API_KEY"])');
    expect(s).toContain('job_id = UUID("abc")');
    expect(s).toContain("hearth.events(client, job_id)");
    expect(s).not.toContain("cancel_job");
  });
});

describe("waterfall phases", () => {
  it("lays the phases end to end, the rest of total_ms last", () => {
    const p = phases({ queued_ms: 5, acquire_ms: 0, bind_ms: 10, run_ms: 80, total_ms: 100 });
    expect(p.map((x) => [x.name, x.start, x.ms])).toEqual([
      ["queued", 0, 5],
      ["acquire", 5, 0],
      ["bind", 5, 10],
      ["run", 15, 80],
      ["finish", 95, 5],
    ]);
  });
});

describe("logs", () => {
  it("splits stored logs into lines, stdout first", () => {
    const lines = logLines({ stdout: "a\nb\n", stderr: "oops" });
    expect(lines.map((l) => `${l.stream}:${l.line}`)).toEqual(["stdout:a", "stdout:b", "stderr:oops"]);
  });

  it("finds matches case-insensitively", () => {
    const lines = logLines({ stdout: "Tick 1\ntick 2\ntock\n", stderr: "" });
    expect(matchLines(lines, "TICK")).toEqual([0, 1]);
    expect(matchLines(lines, "")).toEqual([]);
  });
});

describe("keys", () => {
  it("tells active, expired and revoked keys apart", () => {
    const base = { api_key_id: "k", created_at: "2026-01-01T00:00:00Z", name: "ci", prefix: "hk_ab", tenant_id: "t" };
    const now = Date.parse("2026-12-01T00:00:00Z");
    expect(keyStatus({ ...base }, now)).toBe("active");
    expect(keyStatus({ ...base, expires_at: "2026-11-01T00:00:00Z" }, now)).toBe("expired");
    expect(keyStatus({ ...base, revoked_at: "2026-11-01T00:00:00Z", expires_at: null }, now)).toBe("revoked");
  });
});
