// The TypeScript SDK against the live service (openapi/test-live.sh starts
// it: real Postgres, real pods). HEARTH_URL, HEARTH_TOKEN (a tenant's API
// key) and HEARTH_ADMIN_TOKEN come from there.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { type CreateJob, HearthError, connect, data, events, ok, run } from "../index.js";

function env(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set`);
  return value;
}

const url = env("HEARTH_URL");
const client = connect(url, env("HEARTH_TOKEN"));

function pythonJob(caller: string, code: string): CreateJob {
  return {
    kind: "tool_call",
    profile: "cpu-small",
    caller,
    command: ["python3", "main.py"],
    code: { files: { "main.py": code } },
    timeout_s: 60,
  };
}

const DOUBLE = `
import json, os, sys
data = json.load(sys.stdin)
print("got", data["x"])
with open(os.environ["HEARTH_OUTPUT"], "w") as f:
    json.dump({"double": data["x"] * 2}, f)
`;

test("run submits code files and input and returns the output", async () => {
  const job = await run(client, { ...pythonJob("sdk-ts", DOUBLE), input: { x: 21 } });
  assert.equal(job.state, "succeeded", JSON.stringify(job));
  assert.deepEqual(job.output, { double: 42 });
  assert.equal(job.stdout, "got 21\n");
  assert.equal(job.exit_code, 0);
});

test("list filters and pages with a cursor", async () => {
  const caller = `sdk-ts-list-${randomUUID().slice(0, 8)}`;
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const job = await run(client, pythonJob(caller, `print(${i})`));
    assert.equal(job.state, "succeeded");
    ids.push(job.id);
  }
  const seen: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = ok(
      await client.GET("/v1/jobs", {
        params: { query: { caller, state: "succeeded", kind: "tool_call", limit: 2, ...(cursor ? { cursor } : {}) } },
      }),
    );
    assert.ok(page.jobs.length <= 2);
    seen.push(...page.jobs.map((j) => j.id));
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  assert.deepEqual(seen, [...ids].reverse(), "newest first, every job once");
  const none = ok(await client.GET("/v1/jobs", { params: { query: { caller, state: "failed" } } }));
  assert.deepEqual(none.jobs, []);
});

test("events stream states, output and the finished job", async () => {
  const job = ok(await client.POST("/v1/jobs", { body: pythonJob("sdk-ts", "print('one')\nprint('two')") }));
  const seen = [];
  for await (const event of events(client, job.id)) seen.push(event);
  const names = seen.map((e) => e.event);
  assert.equal(names.at(-1), "done", names.join());
  assert.ok(names.includes("state"));
  const lines = seen.filter((e) => e.event === "output").map((e) => (data(e) as { line: string }).line);
  assert.deepEqual(lines, ["one", "two"]);
  const last = seen.at(-1);
  assert.ok(last);
  assert.equal((data(last) as { state: string }).state, "succeeded");
  // Resuming after the first event replays only what followed it.
  const first = seen[0];
  assert.ok(first?.id);
  const rest = [];
  for await (const event of events(client, job.id, { after: Number(first.id) })) rest.push(event.id);
  assert.deepEqual(rest, seen.slice(1).map((e) => e.id));
});

test("cancel a running job", async () => {
  const job = ok(await client.POST("/v1/jobs", { body: pythonJob("sdk-ts-cancel", "import time\ntime.sleep(120)") }));
  for await (const event of events(client, job.id)) {
    if (event.event === "state" && (data(event) as { state: string }).state === "running") break;
  }
  ok(await client.POST("/v1/jobs/{id}/cancel", { params: { path: { id: job.id } } }));
  const done = ok(await client.GET("/v1/jobs/{id}", { params: { path: { id: job.id }, query: { wait: 30 } } }));
  assert.equal(done.state, "cancelled");
  const again = await client.POST("/v1/jobs/{id}/cancel", { params: { path: { id: job.id } } });
  assert.equal(again.response.status, 409);
  assert.equal(again.error?.code, "job_finished");
});

test("pools", async () => {
  const pools = ok(await client.GET("/v1/pools"));
  assert.ok(pools.pools.some((p) => p.profile === "cpu-small"));
  const pool = ok(await client.GET("/v1/pools/{profile}", { params: { path: { profile: "cpu-small" } } }));
  assert.equal(pool.profile, "cpu-small");
});

test("errors arrive as ErrorBody", async () => {
  const missing = await client.GET("/v1/jobs/{id}", { params: { path: { id: randomUUID() } } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.code, "not_found");

  const invalid = await client.POST("/v1/jobs", { body: { ...pythonJob("sdk-ts", "print(1)"), profile: "no-such-profile" } });
  assert.equal(invalid.response.status, 422);
  assert.equal(invalid.error?.code, "unknown_profile");

  const anonymous = connect(url, "hk_not_a_key");
  await assert.rejects(
    async () => ok(await anonymous.GET("/v1/pools")),
    (e: unknown) => e instanceof HearthError && e.status === 401 && e.code === "unauthorized",
  );

  const admin = connect(url, env("HEARTH_ADMIN_TOKEN"));
  const name = `sdk-ts-${randomUUID().slice(0, 8)}`;
  ok(await admin.POST("/v1/admin/tenants", { body: { name } }));
  const duplicate = await admin.POST("/v1/admin/tenants", { body: { name } });
  assert.equal(duplicate.response.status, 409);
  assert.equal(duplicate.error?.code, "conflict");
});
