/** Test helpers: a fake API (fetch) and rendering with Preact. */

import { render, type ComponentChild } from "preact";
import { act } from "preact/test-utils";

import { configureApi, session, type Session } from "../src/api.js";

export type Handler = (req: Request, url: URL) => Response | Promise<Response>;

export interface FakeApi {
  fetch: typeof fetch;
  calls: Request[];
  bodies: string[];
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(status === 204 ? null : JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
}

/** A fetch answering from `routes`, keyed `"GET /v1/jobs"` (path without query). */
export function fakeApi(routes: Record<string, Handler>): FakeApi {
  const calls: Request[] = [];
  const bodies: string[] = [];
  const f = async (input: RequestInfo | URL, init?: RequestInit) => {
    const req = input instanceof Request ? input : new Request(input, init);
    calls.push(req.clone());
    bodies.push(await req.clone().text());
    const url = new URL(req.url);
    const handler = routes[`${req.method} ${url.pathname}`];
    if (!handler) return json(404, { code: "not_found", message: `no route ${req.method} ${url.pathname}` });
    return handler(req, url);
  };
  const api = { fetch: f as typeof fetch, calls, bodies };
  configureApi({ baseUrl: "http://console.test", fetch: api.fetch });
  return api;
}

export const SESSION: Session = {
  tenant_id: "5b0c7c2e-1111-4a4a-9999-000000000001",
  tenant_name: "acme",
  api_key_id: "00000000-0000-4000-8000-00000000000a",
  expires_at: "2030-01-01T00:00:00Z",
  csrf_token: "csrf-123",
};

export function signedIn(): void {
  session.set({ status: "signed-in", session: { ...SESSION } });
}

export async function mount(node: ComponentChild): Promise<HTMLElement> {
  const root = document.createElement("div");
  document.body.innerHTML = "";
  document.body.appendChild(root);
  await act(() => {
    render(node, root);
  });
  return root;
}

export async function unmount(root: HTMLElement): Promise<void> {
  await act(() => {
    render(null, root);
  });
}

/** Retries `check` until it stops throwing (or 2 s pass). */
export async function waitFor<T>(check: () => T, timeoutMs = 2000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return check();
    } catch (e) {
      if (Date.now() > end) throw e;
    }
    await act(async () => {
      await new Promise((r) => setTimeout(r, 10));
    });
  }
}

export function text(root: ParentNode, selector: string): string {
  const el = root.querySelector(selector);
  if (!el) throw new Error(`no ${selector}`);
  return el.textContent ?? "";
}

export function job(overrides: Record<string, unknown> = {}) {
  return {
    id: "0a1b2c3d-0000-4000-8000-000000000001",
    state: "succeeded",
    kind: "tool_call",
    caller: "agent-7",
    profile: "cpu-small",
    priority: 0,
    exit_code: 0,
    output: { double: 42 },
    stdout: "got 21\n",
    stderr: "",
    stdout_truncated: false,
    stderr_truncated: false,
    error: null,
    source: "warm",
    pods: ["pod-1"],
    attempts: 1,
    timing: { queued_ms: 5, acquire_ms: 0, bind_ms: 10, run_ms: 80, total_ms: 100 },
    created_at: "2026-12-01T14:00:00Z",
    started_at: "2026-12-01T14:00:00.015Z",
    finished_at: "2026-12-01T14:00:00.100Z",
    ...overrides,
  };
}
