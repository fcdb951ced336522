/**
 * The console's only door to the API: an openapi-fetch client typed by the
 * generated `schema.d.ts` (openapi/typescript), authenticated by the
 * `hearth_session` cookie (HttpOnly: this code never sees it). Every request
 * that is not a GET carries the session's CSRF token, which lives in memory
 * only and is read again from `GET /v1/session` after a reload. The API key
 * itself is sent once, to `POST /v1/session`, and kept nowhere.
 */

import createClient, { type Client, type Middleware } from "openapi-fetch";

import type { components, paths } from "../../openapi/typescript/schema.js";
import { Store } from "./store.js";

export type { components, paths };
export type Schemas = components["schemas"];
export type ErrorBody = Schemas["ErrorBody"];
export type Job = Schemas["JobResponse"];
/** A job's submission as accepted (`GET /v1/jobs/{id}/request`). */
export type JobRequest = Schemas["CreateJob"];
export type JobState = Schemas["State"];
export type Kind = Schemas["Kind"];
export type ApiClient = Client<paths>;

export const STATES: readonly JobState[] = [
  "queued",
  "assigned",
  "running",
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
];
export const KINDS: readonly Kind[] = ["tool_call", "verifier", "rollout"];
const FINISHED: ReadonlySet<JobState> = new Set(["succeeded", "failed", "timed_out", "cancelled"]);

export function isFinished(state: JobState): boolean {
  return FINISHED.has(state);
}

/** `GET`/`POST /v1/session`: who is signed in, with which key, until when, and the CSRF token. */
export type Session = Schemas["ConsoleSession"];

export type SessionState =
  | { status: "unknown" }
  | { status: "signed-out"; reason?: string }
  | { status: "signed-in"; session: Session };

/** The session as this page knows it. The CSRF token is in here and nowhere else. */
export const session = new Store<SessionState>({ status: "unknown" });

/** An error answer of the service: its HTTP status and `ErrorBody`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(`${body.code}: ${body.message}`);
    this.name = "ApiError";
  }

  get code(): string {
    return this.body.code;
  }
}

/** An `ErrorBody` out of whatever an error answer held. */
export function errorBody(status: number, body: unknown): ErrorBody {
  if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    if (typeof b.code === "string" && typeof b.message === "string") {
      return b as unknown as ErrorBody;
    }
  }
  const text = typeof body === "string" && body.trim() !== "" ? body.trim().slice(0, 300) : `HTTP ${status}`;
  return { code: status === 0 ? "network" : `http_${status}`, message: text };
}

/** Any thrown value as an `ApiError`, to show its code and message. */
export function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new ApiError(0, { code: "network", message });
}

function csrfToken(): string | null {
  const s = session.value;
  return s.status === "signed-in" ? s.session.csrf_token : null;
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Adds `X-CSRF-Token` to every request that changes something. */
export const csrfMiddleware: Middleware = {
  onRequest({ request }) {
    const token = csrfToken();
    if (!SAFE.has(request.method) && token) request.headers.set("X-CSRF-Token", token);
    return request;
  },
  onResponse({ response }) {
    // The session ended (expired, signed out elsewhere): back to sign-in.
    if (response.status === 401 && session.value.status === "signed-in") {
      session.set({ status: "signed-out", reason: "Your session ended; sign in again." });
    }
    return response;
  },
};

export interface ClientOptions {
  baseUrl?: string;
  fetch?: typeof fetch;
}

function origin(): string {
  return typeof location === "undefined" ? "http://localhost" : location.origin;
}

export function makeClient(options: ClientOptions = {}): ApiClient {
  const client = createClient<paths>({
    baseUrl: options.baseUrl ?? origin(),
    credentials: "same-origin",
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  client.use(csrfMiddleware);
  return client;
}

let current: ApiClient | null = null;
let currentFetch: typeof fetch | undefined;
let currentBase: string | undefined;

/** The client pages use. */
export function api(): ApiClient {
  current ??= makeClient({ ...(currentBase ? { baseUrl: currentBase } : {}), ...(currentFetch ? { fetch: currentFetch } : {}) });
  return current;
}

/** Replaces the transport (tests). */
export function configureApi(options: ClientOptions): void {
  currentFetch = options.fetch;
  currentBase = options.baseUrl;
  current = null;
}

/**
 * The body of a successful openapi-fetch answer; throws `ApiError` with the
 * `ErrorBody` of an error one.
 */
export function ok<T>(answer: { data?: T; error?: unknown; response: Response }): T {
  if (answer.error !== undefined || !answer.response.ok) {
    throw new ApiError(answer.response.status, errorBody(answer.response.status, answer.error));
  }
  return answer.data as T;
}

/** Reads the current session (after a reload, or at start). */
export async function loadSession(): Promise<SessionState> {
  let answer;
  try {
    answer = await api().GET("/v1/session");
  } catch (e) {
    throw asApiError(e);
  }
  const next: SessionState =
    answer.response.status === 401 ? { status: "signed-out" } : { status: "signed-in", session: ok(answer) };
  session.set(next);
  return next;
}

/**
 * Exchanges an API key for a session cookie. The key goes into this one
 * request body and is dropped: the caller must clear its input.
 */
export async function signIn(apiKey: string): Promise<Session> {
  const s = ok(await api().POST("/v1/session", { body: { api_key: apiKey } }));
  session.set({ status: "signed-in", session: s });
  return s;
}

/** Ends the session on the server (and so its cookie), then forgets it here. */
export async function signOut(): Promise<void> {
  const answer = await api().DELETE("/v1/session");
  if (answer.response.status !== 401) ok(answer);
  session.set({ status: "signed-out", reason: "Signed out." });
}
