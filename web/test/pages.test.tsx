import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { act } from "preact/test-utils";

import { session } from "../src/api.js";
import { DataTable } from "../src/components/DataTable.js";
import { ErrorView } from "../src/components/common.js";
import { LogView } from "../src/components/LogView.js";
import { Waterfall } from "../src/components/Waterfall.js";
import { JobDetail } from "../src/pages/JobDetail.js";
import { Jobs } from "../src/pages/Jobs.js";
import { Keys } from "../src/pages/Keys.js";
import { PodDetail } from "../src/pages/Pods.js";
import { Pools } from "../src/pages/Pools.js";
import { SignIn } from "../src/pages/SignIn.js";
import { ApiError } from "../src/api.js";
import { setZone } from "../src/time.js";
import { fakeApi, job, json, mount, signedIn, text, unmount, waitFor } from "./helpers.js";

let root: HTMLElement | null = null;

beforeEach(() => {
  signedIn();
  setZone("utc");
  history.replaceState(null, "", "/console/jobs");
});
afterEach(async () => {
  if (root) await unmount(root);
  root = null;
});

function type(input: HTMLInputElement, value: string) {
  input.value = value;
  input.dispatchEvent(new Event("input", { bubbles: true }));
}

describe("components", () => {
  it("ErrorView shows the ErrorBody code, message and fields", async () => {
    root = await mount(
      <ErrorView
        error={new ApiError(422, { code: "validation_failed", message: "bad job", details: [{ field: "command[0]", message: "empty" }] })}
      />,
    );
    expect(text(root, "[role=alert] .error-code")).toBe("validation_failed");
    expect(text(root, "[role=alert] .error-message")).toBe("bad job");
    expect(text(root, "[role=alert] li")).toBe("command[0]: empty");
  });

  it("Waterfall sizes each phase by its share of the total", async () => {
    root = await mount(<Waterfall timing={{ queued_ms: 10, acquire_ms: 20, bind_ms: 20, run_ms: 50, total_ms: 100 }} />);
    const run = root.querySelector<HTMLElement>("[data-phase=run]")!;
    expect(run.style.marginLeft).toBe("50%");
    expect(run.style.width).toBe("50%");
    expect(root.querySelector("[role=img]")!.getAttribute("aria-label")).toContain("Run 50 ms");
  });

  it("LogView highlights and counts matches, and steps through them", async () => {
    const lines = ["tick 1", "tock", "tick 2", "TICK 3"].map((line, id) => ({ id, stream: "stdout" as const, rank: 0, line }));
    root = await mount(<LogView lines={lines} live={false} />);
    const search = root.querySelector<HTMLInputElement>("input[type=search]")!;
    await act(() => type(search, "tick"));
    expect(text(root, ".match-count")).toBe("1 of 3 matches");
    expect([...root.querySelectorAll("mark")].map((m) => m.textContent)).toEqual(["tick", "tick", "TICK"]);
    await act(() => {
      search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    });
    expect(text(root, ".match-count")).toBe("2 of 3 matches");
    expect(root.querySelector(".log-line.current")!.textContent).toContain("tick 2");
    const only = root.querySelector<HTMLInputElement>("input[type=checkbox]")!;
    await act(() => only.click());
    expect(root.querySelectorAll(".log-line")).toHaveLength(3);
  });

  it("LogView steps to the next match on an Enter pressed as soon as the count shows", async () => {
    const lines = ["tick 1", "tick 2"].map((line, id) => ({ id, stream: "stdout" as const, rank: 0, line }));
    root = await mount(<LogView lines={lines} live={true} />);
    const search = root.querySelector<HTMLInputElement>("input[type=search]")!;
    // No act(): the page renders as a browser would, its effects after paint.
    type(search, "tick");
    while (text(root, ".match-count") !== "1 of 2 matches") await new Promise((r) => setTimeout(r, 0));
    search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    await new Promise((r) => setTimeout(r, 250));
    expect(text(root, ".match-count")).toBe("2 of 2 matches");
  });

  it("DataTable moves between rows with the keyboard and opens with Enter", async () => {
    const opened: string[] = [];
    root = await mount(
      <DataTable
        caption="t"
        columns={[{ header: "Name", cell: (r: { n: string }) => r.n }]}
        rows={[{ n: "a" }, { n: "b" }, { n: "c" }]}
        rowKey={(r) => r.n}
        onOpen={(r) => opened.push(r.n)}
      />,
    );
    const rows = () => [...root!.querySelectorAll<HTMLTableRowElement>("tbody tr")];
    expect(rows().map((r) => r.tabIndex)).toEqual([0, -1, -1]);
    rows()[0]!.focus();
    await act(() => {
      rows()[0]!.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    });
    expect(document.activeElement).toBe(rows()[1]);
    await act(() => {
      rows()[1]!.dispatchEvent(new KeyboardEvent("keydown", { key: "End", bubbles: true }));
    });
    expect(document.activeElement).toBe(rows()[2]);
    await act(() => {
      rows()[2]!.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    });
    expect(opened).toEqual(["c"]);
    expect(rows().map((r) => r.tabIndex)).toEqual([-1, -1, 0]);
  });
});

describe("pages", () => {
  it("sign-in clears the key field and shows the refusal", async () => {
    session.set({ status: "signed-out" });
    const fake = fakeApi({ "POST /v1/session": () => json(401, { code: "unauthorized", message: "unknown API key" }) });
    root = await mount(<SignIn search="" />);
    const input = root.querySelector<HTMLInputElement>("#api-key")!;
    input.value = "hk_wrong";
    await act(() => {
      root!.querySelector("form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    });
    await waitFor(() => expect(text(root!, ".error-code")).toBe("unauthorized"));
    expect(input.value).toBe("");
    expect(fake.calls).toHaveLength(1);
  });

  it("jobs: sends the URL's filters, links the next page with the cursor", async () => {
    const fake = fakeApi({
      "GET /v1/profiles": () => json(200, { profiles: [], mechanisms: [], runtime: "local" }),
      "GET /v1/jobs": () => json(200, { jobs: [job(), job({ id: "0a1b2c3d-0000-4000-8000-000000000002", state: "failed", exit_code: 3 })], next_cursor: "0a1b2c3d-0000-4000-8000-000000000002" }),
    });
    root = await mount(<Jobs search="?state=failed&caller=agent-7&limit=2" />);
    await waitFor(() => expect(root!.querySelectorAll("tbody tr")).toHaveLength(2));
    const listCall = fake.calls.find((c) => new URL(c.url).pathname === "/v1/jobs")!;
    const q = new URL(listCall.url).searchParams;
    expect([q.get("state"), q.get("caller"), q.get("limit"), q.get("cursor")]).toEqual(["failed", "agent-7", "2", null]);
    const next = root.querySelector<HTMLAnchorElement>("a[rel=next]")!;
    expect(next.getAttribute("href")).toBe(
      "/console/jobs?state=failed&caller=agent-7&limit=2&cursor=0a1b2c3d-0000-4000-8000-000000000002",
    );
    expect(root.querySelector<HTMLSelectElement>("select[name=state]")!.value).toBe("failed");
    expect(root.querySelector<HTMLInputElement>("input[name=caller]")!.value).toBe("agent-7");
  });

  it("jobs: applying filters puts them in the URL", async () => {
    fakeApi({
      "GET /v1/profiles": () => json(200, { profiles: [], mechanisms: [], runtime: "local" }),
      "GET /v1/jobs": () => json(200, { jobs: [], next_cursor: null }),
    });
    root = await mount(<Jobs search="?cursor=0a1b2c3d-0000-4000-8000-000000000002" />);
    const caller = root.querySelector<HTMLInputElement>("input[name=caller]")!;
    caller.value = "trainer-0";
    await act(() => {
      root!.querySelector("form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    });
    // A new filter starts at the first page.
    expect(location.pathname + location.search).toBe("/console/jobs?caller=trainer-0");
  });

  it("job detail: a finished job's facts, waterfall, output and logs", async () => {
    fakeApi({
      "GET /v1/jobs/0a1b2c3d-0000-4000-8000-000000000001": () =>
        json(200, job({ state: "failed", exit_code: 3, error: { code: "nonzero_exit", message: "exit status 3" }, source: "cold" })),
      "GET /v1/jobs/0a1b2c3d-0000-4000-8000-000000000001/logs": () => json(200, { stdout: "one\ntwo\n", stderr: "boom\n" }),
    });
    root = await mount(<JobDetail id="0a1b2c3d-0000-4000-8000-000000000001" />);
    await waitFor(() => expect(root!.querySelectorAll(".log-line")).toHaveLength(3));
    expect(text(root, "[data-testid=job-state]")).toBe("failed");
    expect(text(root, ".job-error")).toBe("nonzero_exit exit status 3");
    expect(text(root, ".badge-source-cold")).toBe("cold");
    expect(root.querySelector("[data-phase=run]")).not.toBeNull();
    expect(text(root, "pre[aria-label='Output JSON']")).toContain('"double": 42');
    expect(root.querySelector("button.danger")).toBeNull();
    expect(root.querySelector("a[href='/console/pods/pod-1']")).not.toBeNull();
  });

  it("keys: a new key is shown once; revoking asks first and sends CSRF", async () => {
    const keys = [
      { api_key_id: "00000000-0000-4000-8000-00000000000a", created_at: "2026-11-01T00:00:00Z", name: "default", prefix: "hk_aaaa", tenant_id: "t", last_used_at: "2026-12-01T10:00:00Z" },
    ];
    const fake = fakeApi({
      "GET /v1/keys": () => json(200, keys),
      "POST /v1/keys": async (req) => {
        const body = (await req.json()) as { name: string; expires_at?: string };
        keys.push({ api_key_id: "00000000-0000-4000-8000-00000000000b", created_at: "2026-12-01T00:00:00Z", name: body.name, prefix: "hk_bbbb", tenant_id: "t", last_used_at: null as unknown as string });
        return json(201, { api_key: "hk_bbbb_secret", api_key_id: "00000000-0000-4000-8000-00000000000b", name: body.name, prefix: "hk_bbbb", expires_at: body.expires_at ?? null });
      },
      "DELETE /v1/keys/00000000-0000-4000-8000-00000000000b": () => {
        keys[1] = { ...keys[1]!, revoked_at: "2026-12-01T00:01:00Z" } as (typeof keys)[number];
        return json(200, keys[1]);
      },
    });
    root = await mount(<Keys />);
    await waitFor(() => expect(root!.querySelectorAll("tbody tr")).toHaveLength(1));
    expect(root.textContent).toContain("2026-12-01 10:00:00Z");
    root.querySelector<HTMLInputElement>("input[name=name]")!.value = "ci";
    root.querySelector<HTMLInputElement>("input[name=expires_at]")!.value = "2027-06-30 00:00";
    await act(() => {
      root!.querySelector("form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    });
    await waitFor(() => expect(root!.querySelector<HTMLInputElement>("input[aria-label='New API key']")!.value).toBe("hk_bbbb_secret"));
    const post = fake.calls.findIndex((c) => c.method === "POST");
    expect(JSON.parse(fake.bodies[post]!)).toEqual({ name: "ci", expires_at: "2027-06-30T00:00:00.000Z" });
    await waitFor(() => expect(root!.querySelectorAll("tbody tr")).toHaveLength(2));
    await act(() => root!.querySelector<HTMLButtonElement>("button[aria-label^='Revoke key ci']")!.click());
    await act(() => root!.querySelector<HTMLButtonElement>("button[aria-label='Confirm revoking key ci']")!.click());
    await waitFor(() => expect(root!.querySelector(".badge-key-revoked")).not.toBeNull());
    const del = fake.calls.find((c) => c.method === "DELETE")!;
    expect(del.headers.get("X-CSRF-Token")).toBe("csrf-123");
    await act(() => [...root!.querySelectorAll("button")].find((b) => b.textContent === "I have stored it")!.click());
    expect(root.textContent).not.toContain("hk_bbbb_secret");
  });

  it("pod detail: each decision with its reason code, message and figures", async () => {
    fakeApi({
      "GET /v1/pods/pod-1/events": () =>
        json(200, {
          pod_id: "pod-1",
          next_cursor: null,
          events: [
            { event_id: 1, at: "2026-12-01T14:00:00Z", kind: "start", profile: "cpu-small", job_id: null, reason: { code: "cold_start", message: "no warm or standby pod for agent-7", caller: "agent-7" } },
            { event_id: 2, at: "2026-12-01T14:00:01Z", kind: "release", profile: "cpu-small", reason: { code: "keep_alive_expired", message: "idle 120 s", idle_ms: 120000 } },
          ],
        }),
    });
    root = await mount(<PodDetail id="pod-1" />);
    await waitFor(() => expect(root!.querySelectorAll("tbody tr")).toHaveLength(2));
    expect([...root.querySelectorAll(".badge-reason")].map((b) => b.textContent)).toEqual(["cold_start", "keep_alive_expired"]);
    expect(root.textContent).toContain("no warm or standby pod for agent-7");
    expect(root.textContent).toContain("idle_ms120000");
  });

  it("pools: pods by state, GPUs, budget, callers and the chart of the pool's history", async () => {
    const pool = {
      profile: "gpu-one",
      policy: "firepool",
      queued_jobs: 1,
      queued_pods: 1,
      standby_target: 2,
      objective: { percentile: 0.9, class: "warm", predicted: 0.934, warm_share: 0.881 },
      leader: { is_leader: true, host: "h", replica_id: "r" },
      pods: { active: 1, draining: 0, reserved: 0, standby: 2, starting: 0, warm: 1 },
      gpus: { free_gpus: 0.5, inventory: 2, kind: "accounting-only", shares_per_gpu: 8, held_gpus: { active: 1, warm: 0.25, standby: 0.25, draining: 0 }, held_shares: { active: 8, warm: 2, standby: 2, draining: 0 } },
      budget: { budget_gpus: 1.5, inputs: { arrival_rate_per_s: 0.2, demand_gpus: 1.2, floor_gpus: 0, ceiling_gpus: null, queued_pods: 1, standby_target: 2 } },
      tenant: { budget_gpus: 1, ceiling_gpus: null, floor_gpus: 0, queued_pods: 1, warm_gpus: 0.25 },
      callers: [{ caller: "agent-7", in_flight: 1, keep_alive_ms: 30000, pauses: 12, warm_pods: 1 }],
    };
    const at = (minutesAgo: number) => new Date(Date.now() - minutesAgo * 60_000).toISOString();
    const history = {
      leader: pool.leader,
      profile: "gpu-one",
      step_s: 10,
      samples: [
        { at: at(30), active: 0, warm: 0, standby: 0.25, draining: 0 },
        { at: at(0.1), active: 1, warm: 0.25, standby: 0.25, draining: 0 },
      ],
    };
    fakeApi({
      "GET /v1/pools": () => json(200, { leader: pool.leader, pools: [pool] }),
      "GET /v1/pools/gpu-one/history": () => json(200, history),
    });
    root = await mount(<Pools />);
    await waitFor(() => expect(root!.querySelector("#pool-gpu-one")).not.toBeNull());
    expect(root.textContent).toContain("1.50 held of 2 (accounting-only)");
    expect(root.textContent).toContain("1 jobs (1 pods) waiting");
    expect(root.textContent).toContain("p90 warm start: 93.4 % predicted within it, 88.1 % of recent jobs started warm");
    const caller = [...root.querySelectorAll("table.data tbody tr")].find((r) => r.textContent!.startsWith("agent-7"))!;
    expect([...caller.querySelectorAll("td")].map((td) => td.textContent)).toEqual(["agent-7", "1", "1", "30 s", "12"]);
    expect(root.querySelector("svg path.series")).not.toBeNull();
    expect(root.textContent).toContain("sampled them every 10 s");
    expect(root.querySelector("svg")!.getAttribute("aria-label")).toContain("gpu-one: 1.5 GPUs");
  });
});
