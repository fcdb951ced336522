/**
 * The tenant's jobs, newest first: filters kept in the URL, keyset paging
 * with the API's cursor, and a quiet auto-refresh.
 */

import { useState } from "preact/hooks";

import { api, KINDS, ok, STATES, type Job } from "../api.js";
import { ErrorView, Link, Loading, JobId, StateBadge, Time } from "../components/common.js";
import { DataTable, type Column } from "../components/DataTable.js";
import { filtersToSearch, isFiltered, PAGE_SIZES, parseFilters, toQuery, type JobFilters } from "../filters.js";
import { useResource, useTitle } from "../hooks.js";
import { href, navigate } from "../router.js";
import { formatDuration, parseInstant, RANGES, useZone, formatTime } from "../time.js";

const REFRESH_MS = 5000;

function go(f: JobFilters) {
  navigate(href("/jobs") + filtersToSearch(f));
}

export function jobColumns(): Column<Job>[] {
  return [
    { header: "Job", cell: (j) => <Link href={href(`/jobs/${j.id}`)} aria-label={`Job ${j.id}`}><JobId id={j.id} /></Link> },
    { header: "State", cell: (j) => <StateBadge state={j.state} /> },
    { header: "Kind", cell: (j) => j.kind.replace("_", " ") },
    { header: "Caller", cell: (j) => j.caller },
    { header: "Profile", cell: (j) => j.profile },
    { header: "Source", cell: (j) => j.source ?? "—" },
    { header: "Exit", cell: (j) => (j.exit_code ?? "—"), class: "num" },
    { header: "Total", cell: (j) => (j.finished_at ? formatDuration(j.timing.total_ms) : "—"), class: "num" },
    { header: "Accepted", cell: (j) => <Time iso={j.created_at} /> },
  ];
}

export function Jobs({ search }: { search: string }) {
  useTitle("Jobs");
  const z = useZone();
  const filters = parseFilters(search);
  const [auto, setAuto] = useState(true);
  const [inputError, setInputError] = useState("");

  const profiles = useResource(async (signal) => ok(await api().GET("/v1/profiles", { signal })).profiles, []);
  const jobs = useResource(
    async (signal) => ok(await api().GET("/v1/jobs", { params: { query: toQuery(filters) }, signal })),
    [search],
    { refreshMs: REFRESH_MS, refresh: auto },
  );

  const set = (patch: Partial<JobFilters>) => {
    const next: JobFilters = { ...filters, ...patch };
    delete next.cursor;
    for (const k of Object.keys(next) as (keyof JobFilters)[]) if (next[k] === undefined || next[k] === "") delete next[k];
    go(next);
  };

  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const text = (name: string) => String(form.get(name) ?? "").trim() || undefined;
    const after = text("created_after");
    const before = text("created_before");
    const afterIso = after ? parseInstant(after, z) : undefined;
    const beforeIso = before ? parseInstant(before, z) : undefined;
    if (afterIso === null || beforeIso === null) {
      setInputError("Times are RFC 3339 or YYYY-MM-DD HH:MM (in the zone shown).");
      return;
    }
    const prefix = text("id_prefix");
    if (prefix && !/^[0-9a-fA-F-]{1,36}$/.test(prefix)) {
      setInputError("An id prefix is hex digits (dashes ignored).");
      return;
    }
    setInputError("");
    set({
      caller: text("caller"),
      id_prefix: prefix,
      created_after: afterIso,
      created_before: beforeIso,
      range: afterIso ? undefined : filters.range,
    });
  };

  const profileNames = new Set((profiles.data ?? []).map((p) => p.name));
  if (filters.profile) profileNames.add(filters.profile);
  const page = jobs.data;
  const firstPage = filters.cursor === undefined;

  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs</h1>
      <form class="filters" onSubmit={submit} aria-label="Filter jobs" key={search}>
        <label>
          State
          <select name="state" value={filters.state ?? ""} onChange={(e) => set({ state: (e.currentTarget.value || undefined) as JobFilters["state"] })}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option value={s} key={s}>
                {s.replace("_", " ")}
              </option>
            ))}
          </select>
        </label>
        <label>
          Kind
          <select name="kind" value={filters.kind ?? ""} onChange={(e) => set({ kind: (e.currentTarget.value || undefined) as JobFilters["kind"] })}>
            <option value="">any</option>
            {KINDS.map((k) => (
              <option value={k} key={k}>
                {k.replace("_", " ")}
              </option>
            ))}
          </select>
        </label>
        <label>
          Profile
          <select name="profile" value={filters.profile ?? ""} onChange={(e) => set({ profile: e.currentTarget.value || undefined })}>
            <option value="">any</option>
            {[...profileNames].sort().map((p) => (
              <option value={p} key={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Caller
          <input name="caller" defaultValue={filters.caller ?? ""} placeholder="agent-7" spellcheck={false} />
        </label>
        <label>
          Id prefix
          <input name="id_prefix" defaultValue={filters.id_prefix ?? ""} placeholder="3f2a" spellcheck={false} size={10} />
        </label>
        <label>
          Accepted in
          <select
            name="range"
            value={filters.range ?? (filters.created_after || filters.created_before ? "custom" : "")}
            onChange={(e) => {
              const v = e.currentTarget.value;
              if (v === "custom") return;
              set({ range: v || undefined, created_after: undefined, created_before: undefined });
            }}
          >
            <option value="">any time</option>
            {Object.keys(RANGES).map((r) => (
              <option value={r} key={r}>
                the last {r}
              </option>
            ))}
            <option value="custom">from … to …</option>
          </select>
        </label>
        <label>
          From
          <input name="created_after" defaultValue={filters.created_after ? formatTime(filters.created_after, z) : ""} placeholder={z === "utc" ? "2026-12-01 14:00Z" : "2026-12-01 14:00"} size={18} />
        </label>
        <label>
          To
          <input name="created_before" defaultValue={filters.created_before ? formatTime(filters.created_before, z) : ""} size={18} />
        </label>
        <label>
          Per page
          <select name="limit" value={String(filters.limit ?? 50)} onChange={(e) => set({ limit: Number(e.currentTarget.value) })}>
            {[...new Set<number>([...PAGE_SIZES, filters.limit ?? 50])].sort((a, b) => a - b).map((n) => (
              <option value={String(n)} key={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Apply filters</button>
        {isFiltered(filters) ? (
          <Link href={href("/jobs")} class="button-link">
            Clear
          </Link>
        ) : null}
      </form>
      {inputError ? (
        <p class="error" role="alert">
          {inputError}
        </p>
      ) : null}
      <div class="toolbar">
        <label>
          <input type="checkbox" checked={auto} onChange={(e) => setAuto(e.currentTarget.checked)} /> Refresh every {REFRESH_MS / 1000} s
        </label>
        <button type="button" onClick={() => jobs.reload(true)}>
          Refresh now
        </button>
      </div>
      <ErrorView error={jobs.error} title="Could not list jobs" />
      {jobs.loading && !page ? <Loading what="jobs" /> : null}
      {page ? (
        <>
          <DataTable
            caption={firstPage ? "Jobs, newest first" : "Jobs, newest first (a later page)"}
            captionHidden
            columns={jobColumns()}
            rows={page.jobs}
            rowKey={(j) => j.id}
            onOpen={(j) => navigate(href(`/jobs/${j.id}`))}
            empty={isFiltered(filters) ? "No job matches these filters." : "No jobs yet."}
          />
          <nav class="pager" aria-label="Pages">
            {!firstPage ? (
              <Link href={href("/jobs") + filtersToSearch({ ...filters, cursor: undefined })}>First page</Link>
            ) : null}
            {page.next_cursor ? (
              <Link href={href("/jobs") + filtersToSearch({ ...filters, cursor: page.next_cursor })} rel="next">
                Next page
              </Link>
            ) : (
              <span class="muted">Last page</span>
            )}
          </nav>
        </>
      ) : null}
    </section>
  );
}
