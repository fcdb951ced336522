/**
 * The console in a real browser against the live service with real jobs:
 * sign in, a running job's lines arriving live, searched, the tail resumed,
 * the job cancelled; list filters in a shared URL; a key created and revoked
 * (and then refused by the API); a pod's reasons; pools, control, usage; no
 * API key in any browser storage; sign-out. A screenshot of every page.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";

import { ADMIN, BASE, call, createTenant, launch, must, shot, startProxy, storageDump, until, type Tenant } from "./helpers.js";

let browser: Browser;
let context: BrowserContext;
let page: Page;
let tenant: Tenant;
const problems: string[] = [];
/** Jobs of the filter test: caller -> ids. */
const finished: { id: string; caller: string; kind: string; state: string; pods: string[] }[] = [];

const console_ = (path: string) => `${BASE}/console${path}`;

async function expectNoKeyStored(p: Page, ...keys: string[]) {
  const dump = await storageDump(p);
  expect(dump).not.toContain("hk_");
  for (const k of keys) expect(dump).not.toContain(k);
}

beforeAll(async () => {
  tenant = await createTenant("web-e2e");
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: "light" });
  page = await context.newPage();
  for (const p of [page]) {
    p.on("console", (m) => {
      // The CSP forbids inline script and foreign origins: a violation is a bug.
      if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  }
});

afterAll(async () => {
  await browser?.close();
  if (tenant) await call("DELETE", `/v1/admin/tenants/${tenant.tenant_id}`, ADMIN);
});

describe("console", () => {
  it("is served under a strict CSP, any path under /console/ answering the app", async () => {
    for (const path of ["/console/", "/console/jobs/not-a-job", "/console/no/such/page"]) {
      const r = await fetch(BASE + path);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(await r.text()).toContain('<div id="app">');
    }
  });

  it("signs in with an API key, keeping it nowhere", async () => {
    await page.goto(console_("/jobs?state=running"));
    await page.waitForURL(/\/console\/signin\?next=/);
    await page.getByLabel("API key").fill("hk_not_a_key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.locator(".error-code").textContent()).toBe("unauthorized");
    expect(await page.getByLabel("API key").inputValue()).toBe("");
    await shot(page, "01-signin-refused");

    await page.getByLabel("API key").fill(tenant.api_key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(console_("/jobs?state=running"));
    await expect.poll(() => page.locator(".tenant").textContent()).toBe(tenant.name);

    const cookies = await context.cookies();
    const cookie = cookies.find((c) => c.name === "hearth_session");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    expect(cookie!.value).not.toContain(tenant.api_key);
    await expectNoKeyStored(page, tenant.api_key);

    // A reload keeps the session (the CSRF token is read again).
    await page.reload();
    await expect.poll(() => page.locator(".tenant").textContent()).toBe(tenant.name);
    await expectNoKeyStored(page, tenant.api_key);
  });

  it("refuses a cookie-authenticated mutation without the CSRF header", async () => {
    const answer = await page.evaluate(async () => {
      const r = await fetch("/v1/keys", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      return { status: r.status, body: await r.json() };
    });
    expect(answer.status).toBe(403);
    expect(answer.body.code).toBe("csrf");
  });

  it("follows a running job's lines live through dropped connections, searches them and cancels the job", async () => {
    const job = await must("POST", "/v1/jobs", tenant.api_key, {
      kind: "tool_call",
      profile: "cpu-small",
      caller: "e2e-live",
      timeout_s: 300,
      input: { ticks: 400, note: "it's live" },
      command: ["sh", "-c", 'for i in $(seq 1 400); do echo "tick $i"; [ $((i % 10)) -eq 0 ] && echo "warn $i" >&2; sleep 0.25; done'],
    });
    // Through a proxy whose connections the test cuts.
    const proxy = await startProxy();
    await page.goto(`${proxy.url}/console/jobs/${job.id}`);
    const lines = page.locator(".log-line .log-text");
    await expect.poll(() => lines.count(), { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
    await expect.poll(() => page.getByTestId("tail-status").textContent()).toBe("live");
    const seen = await lines.count();
    // Lines keep arriving while the page is open.
    await expect.poll(() => lines.count(), { timeout: 15_000 }).toBeGreaterThan(seen + 4);
    await expect.poll(() => page.getByTestId("job-state").textContent()).toBe("running");
    await shot(page, "02-job-live");

    // The connection drops: the EventSource reconnects with Last-Event-ID and
    // the stream resumes after the last event, no line missing or twice.
    const reconnects = async () => Number(await page.getByTestId("tail-status").getAttribute("data-reconnects"));
    expect(await reconnects()).toBe(0);
    expect(proxy.dropAll()).toBeGreaterThan(0);
    await expect.poll(reconnects).toBeGreaterThan(0);
    const dropped = await lines.count();
    await expect.poll(() => page.getByTestId("tail-status").textContent(), { timeout: 15_000 }).toBe("live");
    await expect.poll(() => lines.count(), { timeout: 15_000 }).toBeGreaterThan(dropped + 4);
    // And a new stream opened by hand resumes with ?after=<last id>.
    await page.getByRole("button", { name: "Reconnect the live tail" }).click();
    const before = await lines.count();
    await expect.poll(() => lines.count(), { timeout: 15_000 }).toBeGreaterThan(before + 4);
    await expect.poll(() => page.getByTestId("tail-status").textContent()).toBe("live");
    const ticks = (await lines.allTextContents()).filter((l) => l.startsWith("tick "));
    expect(ticks).toEqual(ticks.map((_, i) => `tick ${i + 1}`));
    const warns = (await page.locator(".log-line.stderr .log-text").allTextContents());
    expect(warns.length).toBeGreaterThan(0);
    expect(warns.every((w) => w.startsWith("warn "))).toBe(true);

    // In-place search ("tick 1" is in tick 1 and tick 10 to 19).
    await expect.poll(async () => (await lines.allTextContents()).includes("tick 12"), { timeout: 15_000 }).toBe(true);
    const search = page.getByLabel("Search output");
    await search.fill("tick 1");
    await expect.poll(() => page.locator(".match-count").textContent()).toMatch(/^1 of \d+ matches$/);
    expect(await page.locator(".log-line.hit mark").first().textContent()).toBe("tick 1");
    await search.press("Enter");
    await expect.poll(() => page.locator(".match-count").textContent()).toMatch(/^2 of \d+ matches$/);
    await page.getByLabel("only matching lines").check();
    const shown = await page.locator(".log-line .log-text").allTextContents();
    expect(shown.length).toBeGreaterThan(0);
    expect(shown.every((l) => l.includes("tick 1"))).toBe(true);
    await shot(page, "03-job-search");
    await page.getByLabel("only matching lines").uncheck();
    await search.fill("");

    // Copy as curl / Python: the snippets name the job and read the key from the environment.
    await page.getByRole("button", { name: "Copy as curl" }).click();
    const curl = await page.getByRole("textbox", { name: "Copy as curl" }).inputValue();
    expect(curl).toContain(`curl -s ${proxy.url}/v1/jobs/${job.id} -H "Authorization: Bearer $HEARTH_API_KEY"`);
    // The first command submits the same job again, its input and command included.
    expect(curl).toContain(`curl -s -X POST '${proxy.url}/v1/jobs?wait=60'`);
    expect(curl).toContain(`"input":{"note":"it'\\''s live","ticks":400}`);
    await expect.poll(() => page.getByLabel("Input JSON").textContent()).toContain('"ticks": 400');
    await page.getByRole("button", { name: "Copy as Python" }).click();
    const py = await page.getByRole("textbox", { name: "Copy as Python" }).inputValue();
    expect(py).toContain(`UUID("${job.id}")`);
    expect(py).toContain("again = hearth.run(client, CreateJob.from_dict(json.loads(");
    expect(curl + py).not.toContain("hk_");

    await page.getByRole("button", { name: "Cancel job" }).click();
    await expect.poll(() => page.getByTestId("job-state").textContent(), { timeout: 20_000 }).toBe("cancelled");
    await expect.poll(() => page.getByTestId("tail-status").textContent(), { timeout: 20_000 }).toBe("ended");
    const after = await must("GET", `/v1/jobs/${job.id}`, tenant.api_key);
    expect(after.state).toBe("cancelled");
    expect(after.error.code).toBe("cancelled");
    expect(await page.locator(".job-error code").textContent()).toBe("cancelled");
    await shot(page, "04-job-cancelled");
    await proxy.close();
  });

  it("filters the job list in the URL, survives a reload and pages with the cursor", async () => {
    const spec = [
      { caller: "e2e-a", kind: "tool_call", command: ["sh", "-c", "echo a1"] },
      { caller: "e2e-a", kind: "tool_call", command: ["sh", "-c", "echo a2"] },
      { caller: "e2e-a", kind: "tool_call", command: ["sh", "-c", "echo a3"] },
      { caller: "e2e-a", kind: "tool_call", command: ["sh", "-c", "echo failing; exit 3"] },
      { caller: "e2e-b", kind: "verifier", command: ["sh", "-c", "echo b1"] },
    ];
    const batch = await must("POST", "/v1/jobs/batch?wait=60", tenant.api_key, {
      jobs: spec.map((s) => ({ job: { profile: "cpu-small", ...s } })),
    });
    for (const j of batch.jobs) finished.push({ id: j.id, caller: j.caller, kind: j.kind, state: j.state, pods: j.pods });
    expect(finished.map((j) => j.state)).toEqual(["succeeded", "succeeded", "succeeded", "failed", "succeeded"]);

    await page.goto(console_("/jobs"));
    await page.getByLabel("State").selectOption("succeeded");
    await page.waitForURL(/state=succeeded/);
    await page.getByLabel("Caller").fill("e2e-a");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page.waitForURL(console_("/jobs?state=succeeded&caller=e2e-a"));
    const rows = page.locator("table.data tbody tr");
    await expect.poll(() => rows.count()).toBe(3);
    const check = async (p: Page) => {
      await expect.poll(() => p.locator("table.data tbody tr").count()).toBe(3);
      const texts = await p.locator("table.data tbody tr").allTextContents();
      expect(texts.every((t) => t.includes("e2e-a") && t.includes("succeeded"))).toBe(true);
      expect(await p.getByLabel("State").inputValue()).toBe("succeeded");
      expect(await p.getByLabel("Caller").inputValue()).toBe("e2e-a");
    };
    await check(page);
    await shot(page, "05-jobs-filtered");

    await page.reload();
    await check(page);
    // The URL shared: a fresh page with it shows the same view.
    const shared = await context.newPage();
    await shared.goto(page.url());
    await check(shared);
    await shared.close();

    // Kind filter.
    await page.goto(console_("/jobs?kind=verifier"));
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("e2e-b");

    // Keyset paging: two per page, then the cursor's page.
    await page.goto(console_("/jobs?caller=e2e-a&limit=2"));
    await expect.poll(() => rows.count()).toBe(2);
    const first = await rows.allTextContents();
    await page.getByRole("link", { name: "Next page" }).click();
    await page.waitForURL(/cursor=/);
    await expect.poll(() => rows.allTextContents()).not.toEqual(first);
    await expect.poll(() => rows.count()).toBe(2);
    const second = await rows.allTextContents();
    expect(second.some((r) => first.includes(r))).toBe(false);
    await page.reload();
    await expect.poll(() => rows.allTextContents()).toEqual(second);
    await page.getByRole("link", { name: "First page" }).click();
    await expect.poll(() => rows.allTextContents()).toEqual(first);

    // Keyboard: Tab into the table, arrow down, Enter opens the job.
    await rows.first().focus();
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/console\/jobs\/[0-9a-f-]{36}$/);
    await expect.poll(() => page.locator(".waterfall").count()).toBe(1);
    await shot(page, "06-job-finished");
  });

  it("creates a key shown once, revokes it, and the API refuses it", async () => {
    await page.goto(console_("/keys"));
    await expect.poll(() => page.locator("table.data tbody tr").count()).toBeGreaterThanOrEqual(1);
    await page.getByLabel("Name").fill("e2e-ci");
    await page.getByLabel("Expires (optional)").fill("2030-01-01T00:00:00Z");
    await page.getByRole("button", { name: "Create key" }).click();
    const shown = page.getByLabel("New API key");
    await expect.poll(() => shown.inputValue()).toMatch(/^hk_/);
    const key = await shown.inputValue();
    await shot(page, "07-key-created");
    expect((await call("GET", "/v1/jobs?limit=1", key)).status).toBe(200);
    await expectNoKeyStored(page, key, tenant.api_key);

    const row = page.locator("table.data tbody tr", { hasText: "e2e-ci" });
    await expect.poll(() => row.textContent()).toContain("active");
    expect(await row.textContent()).toContain("2030-01-01");
    await row.getByRole("button", { name: /^Revoke key e2e-ci/ }).click();
    await row.getByRole("button", { name: "Confirm revoking key e2e-ci" }).click();
    await expect.poll(() => row.textContent()).toContain("revoked");
    // Refused on every replica within 2 s.
    await until("the revoked key refused", async () => (await call("GET", "/v1/jobs?limit=1", key)).status === 401, 5000);
    const refused = await call("GET", "/v1/jobs?limit=1", key);
    expect(refused.body.code).toBe("unauthorized");

    await page.getByRole("button", { name: "I have stored it" }).click();
    await page.reload();
    await expect.poll(() => page.locator("table.data tbody tr", { hasText: "e2e-ci" }).count()).toBe(1);
    expect(await page.content()).not.toContain(key);
    // The list shows when the sign-in key was last used.
    const lastUsed = page.locator("table.data tbody tr", { hasText: "default" }).first().locator("td:nth-child(6)");
    expect(await lastUsed.textContent()).toMatch(/^\d{4}-\d{2}-\d{2} /);
    await shot(page, "08-keys");
  });

  it("shows why a pod was started, with its reasons", async () => {
    const job = finished.find((j) => j.pods.length > 0)!;
    await page.goto(console_(`/jobs/${job.id}`));
    await page.getByRole("link", { name: new RegExp(`^Pod ${job.pods[0]}`) }).click();
    await page.waitForURL(console_(`/pods/${encodeURIComponent(job.pods[0]!)}`));
    const rows = page.locator("table.data tbody tr");
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(1);
    const reasons = await page.locator(".badge-reason").allTextContents();
    expect(reasons.length).toBeGreaterThan(0);
    expect(reasons.every((r) => /^[a-z_]+$/.test(r))).toBe(true);
    const kinds = await page.locator("table.data tbody tr td:nth-child(2)").allTextContents();
    expect(kinds).toContain("start");
    await shot(page, "09-pod");

    await page.goto(console_("/pods"));
    await expect.poll(() => page.locator("table.data tbody tr").count()).toBeGreaterThanOrEqual(1);
    await shot(page, "10-pods");
  });

  it("shows the pools: pods by state, GPU shares, budget, callers and the GPU chart", async () => {
    const gpu = await must("POST", "/v1/jobs?wait=60", tenant.api_key, {
      kind: "tool_call",
      profile: "gpu-one",
      caller: "e2e-gpu",
      command: ["sh", "-c", "echo gpu"],
    });
    expect(gpu.state).toBe("succeeded");
    await page.goto(console_("/pools"));
    const card = page.locator("article.pool", { has: page.locator("#pool-gpu-one") });
    await expect.poll(() => card.count()).toBe(1);
    const text = (await card.textContent()) ?? "";
    expect(text).toContain("accounting-only");
    expect(text).toContain("Pods by state");
    expect(text).toContain("GPU shares held");
    expect(text).toContain("Standby target");
    expect(text).toContain("Budget");
    await expect.poll(() => card.locator("table.data tbody tr", { hasText: "e2e-gpu" }).count()).toBe(1);
    await expect.poll(() => page.locator("svg path.series").count()).toBeGreaterThanOrEqual(1);
    // The leader's history (sampled every 0.5 s here) holds the warm GPU.
    await expect
      .poll(() => page.getByRole("img", { name: /GPUs held by pool/ }).getAttribute("aria-label"), { timeout: 15_000 })
      .toMatch(/gpu-one: 1(\.0+)? GPUs/);
    await shot(page, "11-pools");
  });

  it("shows control policies and the live shares, and the usage", async () => {
    const policy = await must("POST", "/v1/control/policies", tenant.api_key, {
      name: "e2e-policy",
      version: 1,
      registers: 2,
      inputs: 1,
      routes: [{ name: "step", body: [{ op: "add", dst: 0, a: { reg: 0 }, b: { input: 0 } }] }],
    });
    await must(
      "POST",
      "/v1/control/events",
      tenant.api_key,
      Array.from({ length: 20 }, (_, i) => ({ policy: policy.policy_id, session: `s${i % 4}`, input: [i] })),
    );
    await page.goto(console_("/control"));
    await expect.poll(() => page.locator("table.data tbody tr", { hasText: "e2e-policy" }).count()).toBe(1);
    await expect.poll(() => page.locator("[data-metric=a]").textContent()).toMatch(/%$/);
    for (const m of ["f", "p_star", "u", "r_a"]) expect(await page.locator(`[data-metric=${m}]`).count()).toBe(1);
    await shot(page, "12-control");

    await page.goto(console_("/usage"));
    await expect.poll(async () => Number(await page.getByTestId("usage-jobs").textContent())).toBeGreaterThanOrEqual(7);
    expect(await page.locator("table.data tbody tr", { hasText: "cpu-small" }).count()).toBe(1);
    await shot(page, "13-usage");
  });

  it("switches to UTC and dark mode", async () => {
    await page.goto(console_("/jobs"));
    await page.getByRole("button", { name: "Local time" }).click();
    await expect.poll(() => page.locator("table.data tbody tr time").first().textContent()).toMatch(/Z$/);
    await page.emulateMedia({ colorScheme: "dark" });
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(bg).toBe("rgb(13, 17, 23)");
    await shot(page, "14-jobs-dark-utc");
    await page.emulateMedia({ colorScheme: "light" });
  });

  it("signs out: the session is revoked", async () => {
    await expectNoKeyStored(page, tenant.api_key);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/console\/signin/);
    const status = await page.evaluate(async () => (await fetch("/v1/session")).status);
    expect(status).toBe(401);
    await page.goto(console_("/keys"));
    await page.waitForURL(/\/console\/signin\?next=%2Fconsole%2Fkeys/);
    await shot(page, "15-signed-out");
    expect(problems).toEqual([]);
  });
});
