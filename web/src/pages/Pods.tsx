/**
 * Pods: why each pod that served this tenant was started, promoted, assigned,
 * reset or released (`GET /v1/pods/{id}/events`). The API lists no pods, so
 * the list is gathered from the pods of the latest jobs; any pod id opens.
 */

import { useState } from "preact/hooks";

import { api, asApiError, ok, type ApiError, type Job, type Schemas } from "../api.js";
import { Badge, ErrorView, Link, Loading, JobId, Time } from "../components/common.js";
import { DataTable } from "../components/DataTable.js";
import { useResource, useTitle } from "../hooks.js";
import { href, navigate } from "../router.js";

interface PodRow {
  pod: string;
  profile: string;
  caller: string;
  jobs: number;
  lastJob: Job;
}

export function podsOfJobs(jobs: Job[]): PodRow[] {
  const rows = new Map<string, PodRow>();
  for (const j of jobs) {
    for (const pod of j.pods) {
      const row = rows.get(pod);
      if (row) row.jobs += 1;
      else rows.set(pod, { pod, profile: j.profile, caller: j.caller, jobs: 1, lastJob: j });
    }
  }
  return [...rows.values()];
}

export function Pods() {
  useTitle("Pods");
  const [pod, setPod] = useState("");
  const recent = useResource(
    async (signal) => ok(await api().GET("/v1/jobs", { params: { query: { limit: 200 } }, signal })).jobs,
    [],
    { refreshMs: 10_000 },
  );
  const rows = podsOfJobs(recent.data ?? []);
  return (
    <section aria-labelledby="pods-title">
      <h1 id="pods-title">Pods</h1>
      <p class="muted">
        Each pod's decisions with their reasons: why it was started, reused, promoted, kept or released. Pods of your
        200 latest jobs are listed; open any other by its id.
      </p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          if (pod.trim()) navigate(href(`/pods/${encodeURIComponent(pod.trim())}`));
        }}
      >
        <label>
          Pod id <input value={pod} onInput={(e) => setPod(e.currentTarget.value)} spellcheck={false} size={40} />
        </label>
        <button type="submit">Open pod</button>
      </form>
      <ErrorView error={recent.error} title="Could not list recent jobs" />
      {recent.loading && !recent.data ? <Loading what="pods" /> : null}
      {recent.data ? (
        <DataTable
          caption="Pods of recent jobs"
          captionHidden
          columns={[
            { header: "Pod", cell: (r) => <Link href={href(`/pods/${encodeURIComponent(r.pod)}`)}>{r.pod}</Link> },
            { header: "Profile", cell: (r) => r.profile },
            { header: "Caller", cell: (r) => r.caller },
            { header: "Recent jobs", cell: (r) => r.jobs, class: "num" },
            {
              header: "Latest job",
              cell: (r) => (
                <Link href={href(`/jobs/${r.lastJob.id}`)}>
                  <JobId id={r.lastJob.id} />
                </Link>
              ),
            },
            { header: "Accepted", cell: (r) => <Time iso={r.lastJob.created_at} /> },
          ]}
          rows={rows}
          rowKey={(r) => r.pod}
          onOpen={(r) => navigate(href(`/pods/${encodeURIComponent(r.pod)}`))}
          empty="No pod has run a recent job yet."
        />
      ) : null}
    </section>
  );
}

type PodEvent = Schemas["PodEventResponse"];

/** A reason's code, message and figures (every other field). */
export function Reason({ reason }: { reason: PodEvent["reason"] }) {
  const { code, message, ...figures } = reason as { code?: unknown; message?: unknown } & Record<string, unknown>;
  const entries = Object.entries(figures);
  return (
    <div class="reason">
      {typeof code === "string" ? <Badge kind="reason">{code}</Badge> : null}{" "}
      {typeof message === "string" ? <span class="reason-message">{message}</span> : null}
      {entries.length > 0 ? (
        <dl class="figures">
          {entries.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd>{v === null ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v)}</dd>
            </div>
          ))}
        </dl>
      ) : null}
    </div>
  );
}

export function PodDetail({ id }: { id: string }) {
  useTitle(`Pod ${id}`);
  const [more, setMore] = useState<PodEvent[]>([]);
  const [cursor, setCursor] = useState<string | null | undefined>(undefined);
  const [moreError, setMoreError] = useState<ApiError | undefined>();
  const first = useResource(
    async (signal) => {
      const page = ok(await api().GET("/v1/pods/{id}/events", { params: { path: { id }, query: { limit: 200 } }, signal }));
      setMore([]);
      setCursor(page.next_cursor ?? null);
      return page;
    },
    [id],
  );
  const loadMore = async () => {
    if (!cursor) return;
    try {
      const page = ok(await api().GET("/v1/pods/{id}/events", { params: { path: { id }, query: { limit: 200, cursor } } }));
      setMore((m) => m.concat(page.events));
      setCursor(page.next_cursor ?? null);
    } catch (e) {
      setMoreError(asApiError(e));
    }
  };
  const events = (first.data?.events ?? []).concat(more);
  return (
    <section aria-labelledby="pod-title">
      <p class="crumbs">
        <Link href={href("/pods")}>Pods</Link> /
      </p>
      <h1 id="pod-title">
        Pod <code class="id">{id}</code>
      </h1>
      <ErrorView error={first.error} title="Could not read the pod's events" />
      {first.loading && !first.data ? <Loading what="the pod's events" /> : null}
      {first.data ? (
        <>
          <DataTable
            caption="Decisions about this pod, oldest first, with their reasons"
            columns={[
              { header: "When", cell: (e) => <Time iso={e.at} /> },
              { header: "Event", cell: (e) => <Badge kind={`pod-${e.kind}`}>{e.kind}</Badge> },
              { header: "Reason", cell: (e) => <Reason reason={e.reason} /> },
              {
                header: "Job",
                cell: (e) =>
                  e.job_id ? (
                    <Link href={href(`/jobs/${e.job_id}`)}>
                      <JobId id={e.job_id} />
                    </Link>
                  ) : (
                    "—"
                  ),
              },
              { header: "Profile", cell: (e) => e.profile },
            ]}
            rows={events}
            rowKey={(e) => String(e.event_id)}
            empty="No events recorded for this pod."
          />
          {cursor ? (
            <button type="button" onClick={loadMore}>
              Load later events
            </button>
          ) : null}
          <ErrorView error={moreError} />
        </>
      ) : null}
    </section>
  );
}
