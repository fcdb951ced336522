/**
 * The TypeScript SDK of Hearth: the types generated from openapi.json by
 * openapi-typescript (`schema.d.ts`, see ../generate.sh), used with
 * openapi-fetch, whose client checks every path, parameter, body and answer
 * against them. This module adds only what a generator cannot: `connect`
 * for an authenticated client, `ok` to turn an `ErrorBody` answer into a
 * `HearthError`, `run` to submit a job and wait for its end, and `events` to
 * iterate over a job's server-sent events.
 */

import createClient, { type Client } from "openapi-fetch";

import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
export type Schemas = components["schemas"];
export type ErrorBody = Schemas["ErrorBody"];
export type CreateJob = Schemas["CreateJob"];
export type Job = Schemas["JobResponse"];
export type ServerSentEvent = Schemas["ServerSentEvent"];
export type HearthClient = Client<paths>;

/** The states a job does not leave. */
export const FINISHED: ReadonlySet<Schemas["State"]> = new Set([
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
]);

/** An error answer of the service: its HTTP status and `ErrorBody`. */
export class HearthError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(`${status} ${body.code}: ${body.message}`);
    this.name = "HearthError";
  }

  /** The stable error code (`not_found`, `validation_failed`, ...). */
  get code(): string {
    return this.body.code;
  }
}

/**
 * A client for `baseUrl` that sends `token` (an API key, a JWT or the admin
 * token) as its bearer credentials.
 */
export function connect(baseUrl: string, token: string): HearthClient {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}

/** The body of a successful answer; throws `HearthError` for an error one. */
export function ok<T>(
  answer: { data: T; error?: never; response: Response } | { data?: never; error: ErrorBody; response: Response },
): T {
  if (answer.error !== undefined) {
    throw new HearthError(answer.response.status, answer.error);
  }
  return answer.data;
}

/**
 * Submits `job` and resolves to it once finished: the service waits up to
 * `wait` seconds per request (it may cap it), and while the job has not
 * finished it is asked for again until `deadline` seconds have passed
 * (default: the job's `timeout_s` plus a minute). Resolves to the job as it
 * stands then, finished or not: look at `state`.
 */
export async function run(
  client: HearthClient,
  job: CreateJob,
  options: { wait?: number; deadline?: number } = {},
): Promise<Job> {
  const wait = options.wait ?? 60;
  const end = Date.now() + 1000 * (options.deadline ?? (job.timeout_s ?? 60) + 60);
  let current = ok(await client.POST("/v1/jobs", { params: { query: { wait } }, body: job }));
  while (!FINISHED.has(current.state)) {
    const left = (end - Date.now()) / 1000;
    if (left <= 0) break;
    current = ok(
      await client.GET("/v1/jobs/{id}", {
        params: { path: { id: current.id }, query: { wait: Math.min(wait, left) } },
      }),
    );
  }
  return current;
}

/**
 * The events of a job, as they happen: `state` for each state it enters,
 * `output` for each line it prints, and last `done` with the job (the
 * iteration ends there). `after`: resume after the event with this id.
 * `data` is JSON text (see `data`).
 */
export async function* events(
  client: HearthClient,
  id: string,
  options: { after?: number; signal?: AbortSignal } = {},
): AsyncGenerator<ServerSentEvent> {
  const query = options.after === undefined ? {} : { after: options.after };
  const answer = await client.GET("/v1/jobs/{id}/events", {
    params: { path: { id }, query },
    parseAs: "stream",
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (answer.error !== undefined) {
    throw new HearthError(answer.response.status, answer.error);
  }
  const body = answer.data;
  if (answer.response.status === 204 || !body) return;
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  let fields: { event?: string; id?: string } = {};
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        if (line === "") {
          if (data.length > 0) {
            const event: ServerSentEvent = { data: data.join("\n"), ...fields };
            yield event;
            if (fields.event === "done") return;
          }
          fields = {};
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "data") data.push(value);
        else if (name === "event" || name === "id") fields[name] = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** An event's data, parsed from its JSON. */
export function data(event: ServerSentEvent): unknown {
  return JSON.parse(event.data);
}
