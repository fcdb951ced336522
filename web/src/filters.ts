/**
 * The jobs list's filters and page, kept in the URL's query so that a view
 * can be shared and reloaded: `?state=running&caller=agent-7&range=1h`.
 */

import { KINDS, STATES, type JobState, type Kind, type paths } from "./api.js";
import { RANGES } from "./time.js";

export type ListJobsQuery = NonNullable<paths["/v1/jobs"]["get"]["parameters"]["query"]>;

export interface JobFilters {
  state?: JobState;
  kind?: Kind;
  caller?: string;
  profile?: string;
  id_prefix?: string;
  /** A relative range (`15m`, `1h`, `6h`, `24h`, `7d`), counted back from each refresh. */
  range?: string;
  created_after?: string;
  created_before?: string;
  limit?: number;
  cursor?: string;
}

const ORDER: (keyof JobFilters)[] = [
  "state",
  "kind",
  "caller",
  "profile",
  "id_prefix",
  "range",
  "created_after",
  "created_before",
  "limit",
  "cursor",
];

export const PAGE_SIZES = [25, 50, 100, 200] as const;

function text(params: URLSearchParams, name: string): string | undefined {
  const v = params.get(name)?.trim();
  return v ? v : undefined;
}

/** The filters a query string holds; values the API would refuse are dropped. */
export function parseFilters(search: string): JobFilters {
  const p = new URLSearchParams(search);
  const f: JobFilters = {};
  const state = text(p, "state");
  if (state && (STATES as readonly string[]).includes(state)) f.state = state as JobState;
  const kind = text(p, "kind");
  if (kind && (KINDS as readonly string[]).includes(kind)) f.kind = kind as Kind;
  const caller = text(p, "caller");
  if (caller) f.caller = caller;
  const profile = text(p, "profile");
  if (profile) f.profile = profile;
  const prefix = text(p, "id_prefix");
  if (prefix && /^[0-9a-fA-F-]{1,36}$/.test(prefix)) f.id_prefix = prefix;
  const range = text(p, "range");
  if (range && range in RANGES) f.range = range;
  for (const name of ["created_after", "created_before"] as const) {
    const v = text(p, name);
    if (v && !Number.isNaN(new Date(v).getTime())) f[name] = v;
  }
  const limit = Number(text(p, "limit"));
  if (Number.isInteger(limit) && limit >= 1 && limit <= 200) f.limit = limit;
  const cursor = text(p, "cursor");
  if (cursor) f.cursor = cursor;
  return f;
}

/** The query string of `f` (with `?`, or empty), keys in a stable order. */
export function filtersToSearch(f: JobFilters): string {
  const p = new URLSearchParams();
  for (const key of ORDER) {
    const v = f[key];
    if (v !== undefined && v !== "") p.set(key, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : "";
}

/** The `GET /v1/jobs` query of `f` at `now` (a relative range becomes `created_after`). */
export function toQuery(f: JobFilters, now: number = Date.now()): ListJobsQuery {
  const q: ListJobsQuery = {};
  if (f.state) q.state = f.state;
  if (f.kind) q.kind = f.kind;
  if (f.caller) q.caller = f.caller;
  if (f.profile) q.profile = f.profile;
  if (f.id_prefix) q.id_prefix = f.id_prefix;
  const range = f.range ? RANGES[f.range] : undefined;
  if (range !== undefined) q.created_after = new Date(now - range).toISOString();
  else if (f.created_after) q.created_after = f.created_after;
  if (f.created_before) q.created_before = f.created_before;
  if (f.limit) q.limit = f.limit;
  if (f.cursor) q.cursor = f.cursor;
  return q;
}

/** Whether any filter (not the page) is set. */
export function isFiltered(f: JobFilters): boolean {
  return ORDER.some((k) => k !== "limit" && k !== "cursor" && f[k] !== undefined);
}
