/**
 * Browser-test helpers: the live service (HEARTH_URL, HEARTH_ADMIN_TOKEN
 * from web/test.sh), its API through plain fetch with bearer keys, and
 * Debian's chromium through playwright-core (never a downloaded browser).
 */

import { mkdirSync } from "node:fs";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";

import { chromium, type Browser, type Page } from "playwright-core";

export const BASE = required("HEARTH_URL").replace(/\/+$/, "");
export const ADMIN = required("HEARTH_ADMIN_TOKEN");
export const ARTIFACTS = process.env.HEARTH_ARTIFACTS ?? join(import.meta.dirname, "..", "artifacts");
export const CHROMIUM = process.env.HEARTH_CHROMIUM ?? "/usr/bin/chromium";

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests through web/test.sh`);
  return v;
}

export interface Answer {
  status: number;
  body: any;
}

export async function call(method: string, path: string, token: string | null, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(BASE + path, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON.
  }
  return { status: response.status, body: parsed };
}

export async function must(method: string, path: string, token: string | null, body?: unknown): Promise<any> {
  const a = await call(method, path, token, body);
  if (a.status >= 300) throw new Error(`${method} ${path}: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body;
}

export interface Tenant {
  tenant_id: string;
  api_key: string;
  name: string;
}

export async function createTenant(prefix: string): Promise<Tenant> {
  const name = `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
  const t = await must("POST", "/v1/admin/tenants", ADMIN, { name });
  return { tenant_id: t.tenant_id, api_key: t.api_key, name };
}

export async function launch(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root in CI containers: chromium's sandbox needs user namespaces it may not have.
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
}

/**
 * Saves a screenshot of the page, after checking that each of its form
 * controls and buttons has an accessible name.
 */
export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const unnamed = await page.evaluate(() => {
    const bad: string[] = [];
    for (const el of document.querySelectorAll<HTMLElement>("input, select, textarea, button")) {
      const labelled =
        (el.getAttribute("aria-label") ?? "").trim() !== "" ||
        (el instanceof HTMLButtonElement && (el.textContent ?? "").trim() !== "") ||
        ("labels" in el && (el as HTMLInputElement).labels !== null && (el as HTMLInputElement).labels!.length > 0);
      if (!labelled) bad.push(el.outerHTML.slice(0, 120));
    }
    return bad;
  });
  if (unnamed.length > 0) throw new Error(`${name}: controls without an accessible name: ${unnamed.join(" | ")}`);
}

/** Everything the page's scripts can store: no API key may be in there. */
export async function storageDump(page: Page): Promise<string> {
  return page.evaluate(() => {
    const parts: string[] = [`cookie=${document.cookie}`];
    for (const s of [localStorage, sessionStorage]) {
      for (let i = 0; i < s.length; i++) {
        const k = s.key(i) ?? "";
        parts.push(`${k}=${s.getItem(k) ?? ""}`);
      }
    }
    return parts.join("\n");
  });
}

export async function until<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface Proxy {
  url: string;
  /** Cuts every connection through the proxy (the browser sees them drop). */
  dropAll: () => number;
  close: () => Promise<void>;
}

/**
 * A TCP proxy in front of the service, on another loopback port: the page
 * loaded through it is the same service (the session cookie is per host, not
 * per port), and the test can cut its connections as a flaky network would.
 */
export async function startProxy(): Promise<Proxy> {
  const target = new URL(BASE);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    const forget = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", forget).on("error", forget);
    upstream.on("close", forget).on("error", forget);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    dropAll: () => {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      sockets.clear();
      return n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
