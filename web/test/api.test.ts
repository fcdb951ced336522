import { beforeEach, describe, expect, it } from "vitest";

import { api, ApiError, loadSession, ok, session, signIn, signOut } from "../src/api.js";
import { fakeApi, json, SESSION, signedIn } from "./helpers.js";

function storageDump(): string {
  const all: string[] = [document.cookie];
  for (const s of [localStorage, sessionStorage]) {
    for (let i = 0; i < s.length; i++) {
      const k = s.key(i)!;
      all.push(k, s.getItem(k) ?? "");
    }
  }
  return all.join("\n");
}

describe("session and CSRF", () => {
  beforeEach(() => {
    session.set({ status: "unknown" });
    localStorage.clear();
    sessionStorage.clear();
  });

  it("signs in by posting the key once and keeps only the CSRF token, in memory", async () => {
    const fake = fakeApi({ "POST /v1/session": () => json(201, SESSION) });
    await signIn("hk_secret_key");
    expect(fake.calls).toHaveLength(1);
    expect(JSON.parse(fake.bodies[0]!)).toEqual({ api_key: "hk_secret_key" });
    expect(session.value).toEqual({ status: "signed-in", session: SESSION });
    expect(storageDump()).not.toContain("hk_");
  });

  it("shows a refused key's ErrorBody", async () => {
    fakeApi({ "POST /v1/session": () => json(401, { code: "unauthorized", message: "unknown API key" }) });
    const e = await signIn("hk_bad").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).code).toBe("unauthorized");
    expect((e as ApiError).message).toBe("unauthorized: unknown API key");
    expect(session.value.status).toBe("unknown");
  });

  it("re-reads the CSRF token from GET /v1/session after a reload", async () => {
    fakeApi({ "GET /v1/session": () => json(200, { ...SESSION, csrf_token: "fresh" }) });
    const s = await loadSession();
    expect(s).toEqual({ status: "signed-in", session: { ...SESSION, csrf_token: "fresh" } });
  });

  it("is signed out when GET /v1/session answers 401", async () => {
    fakeApi({ "GET /v1/session": () => json(401, { code: "unauthorized", message: "no session" }) });
    expect(await loadSession()).toEqual({ status: "signed-out" });
  });

  it("sends X-CSRF-Token on mutations only", async () => {
    signedIn();
    const fake = fakeApi({
      "GET /v1/keys": () => json(200, []),
      "POST /v1/keys": () => json(201, { api_key: "hk_x", api_key_id: "k", name: "ci", prefix: "hk_x" }),
      "DELETE /v1/keys/00000000-0000-4000-8000-000000000000": () => json(200, {}),
      "POST /v1/jobs/00000000-0000-4000-8000-000000000000/cancel": () => json(200, {}),
    });
    ok(await api().GET("/v1/keys"));
    ok(await api().POST("/v1/keys", { body: { name: "ci" } }));
    ok(await api().DELETE("/v1/keys/{api_key_id}", { params: { path: { api_key_id: "00000000-0000-4000-8000-000000000000" } } }));
    ok(await api().POST("/v1/jobs/{id}/cancel", { params: { path: { id: "00000000-0000-4000-8000-000000000000" } } }));
    expect(fake.calls.map((c) => [c.method, c.headers.get("X-CSRF-Token")])).toEqual([
      ["GET", null],
      ["POST", "csrf-123"],
      ["DELETE", "csrf-123"],
      ["POST", "csrf-123"],
    ]);
    expect(fake.calls.every((c) => c.headers.get("Authorization") === null)).toBe(true);
  });

  it("signs out with the CSRF token and forgets the session", async () => {
    signedIn();
    const fake = fakeApi({ "DELETE /v1/session": () => new Response(null, { status: 204 }) });
    await signOut();
    expect(fake.calls[0]!.headers.get("X-CSRF-Token")).toBe("csrf-123");
    expect(session.value.status).toBe("signed-out");
  });

  it("goes back to sign-in when an API call answers 401", async () => {
    signedIn();
    fakeApi({ "GET /v1/pools": () => json(401, { code: "unauthorized", message: "session expired" }) });
    const e = await api()
      .GET("/v1/pools")
      .then(ok)
      .catch((x: unknown) => x);
    expect((e as ApiError).body).toEqual({ code: "unauthorized", message: "session expired" });
    expect(session.value.status).toBe("signed-out");
  });

  it("turns a non-JSON error answer into an ErrorBody", async () => {
    signedIn();
    fakeApi({ "GET /v1/pools": () => new Response("bad gateway", { status: 502 }) });
    const e = (await api()
      .GET("/v1/pools")
      .then(ok)
      .catch((x: unknown) => x)) as ApiError;
    expect(e.status).toBe(502);
    expect(e.body.code).toBe("http_502");
  });
});
