/**
 * One job: state, source, exit code and error, the timing waterfall, input
 * and output, and its output lines: replayed and followed live through the
 * job's event stream while it runs (resuming after the last event on a
 * reconnect), read from its logs once it has ended.
 */

import { useEffect, useRef, useState } from "preact/hooks";

import { api, ApiError, asApiError, errorBody, isFinished, ok, type Job, type JobRequest, type JobState } from "../api.js";
import { Badge, CopyButton, ErrorView, Json, Link, Loading, StateBadge, Time } from "../components/common.js";
import { LogView } from "../components/LogView.js";
import { Waterfall } from "../components/Waterfall.js";
import { useTitle } from "../hooks.js";
import { curlSnippet, pythonSnippet } from "../snippets.js";
import { logLines, outputLine, Tail, type OutputLine, type TailStatus } from "../tail.js";
import { href } from "../router.js";

const STATUS_TEXT: Record<TailStatus, string> = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  ended: "ended",
};

export function JobDetail({ id }: { id: string }) {
  useTitle(`Job ${id.slice(0, 8)}`);
  const [job, setJob] = useState<Job | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const [lines, setLines] = useState<OutputLine[]>([]);
  const [tailStatus, setTailStatus] = useState<TailStatus | null>(null);
  const [reconnects, setReconnects] = useState(0);
  const [logNote, setLogNote] = useState<string | undefined>();
  const [cancelError, setCancelError] = useState<ApiError | undefined>();
  const [cancelling, setCancelling] = useState(false);
  // The job's submission as accepted (its input, and the body that runs it again).
  const [request, setRequest] = useState<JobRequest | undefined>();
  const [requestError, setRequestError] = useState<ApiError | undefined>();
  const tailRef = useRef<Tail | null>(null);

  useEffect(() => {
    let stopped = false;
    const controller = new AbortController();
    setJob(undefined);
    setLines([]);
    setError(undefined);
    setTailStatus(null);
    setRequest(undefined);
    setRequestError(undefined);
    api()
      .GET("/v1/jobs/{id}/request", { params: { path: { id } }, signal: controller.signal })
      .then((answer) => {
        if (!stopped) setRequest(ok(answer));
      })
      .catch((e: unknown) => {
        if (!stopped && !controller.signal.aborted) setRequestError(asApiError(e));
      });

    const readLogs = async () => {
      try {
        const logs = ok(await api().GET("/v1/jobs/{id}/logs", { params: { path: { id } }, signal: controller.signal }));
        if (!stopped) setLines(logLines(logs));
      } catch (e) {
        if (!stopped) setLogNote(`Logs unavailable: ${asApiError(e).message}`);
      }
    };

    (async () => {
      let first: Job;
      try {
        first = ok(await api().GET("/v1/jobs/{id}", { params: { path: { id } }, signal: controller.signal }));
      } catch (e) {
        if (!stopped) setError(asApiError(e));
        return;
      }
      if (stopped) return;
      setJob(first);
      if (isFinished(first.state)) {
        setLogNote("The job has ended: its stored logs, stdout first, then stderr.");
        await readLogs();
        return;
      }
      setLogNote("Live: lines arrive as the job prints them.");
      const pending: OutputLine[] = [];
      let flush: ReturnType<typeof setTimeout> | null = null;
      const tail = new Tail({
        url: `/v1/jobs/${encodeURIComponent(id)}/events`,
        onStatus: (s) => {
          if (stopped) return;
          setTailStatus(s);
          if (s === "reconnecting") setReconnects((n) => n + 1);
        },
        // The browser gave up on the stream: is there still a job to follow?
        beforeReconnect: async () => {
          const answer = await api().GET("/v1/jobs/{id}", { params: { path: { id } } });
          const status = answer.response.status;
          if (status === 401 || status === 403 || status === 404) {
            setError(asApiError(new ApiError(status, errorBody(status, answer.error))));
            return false;
          }
          return true;
        },
        onEvent: (e) => {
          if (stopped) return;
          const line = outputLine(e);
          if (line) {
            // Batch renders: a chatty job prints thousands of lines a second.
            pending.push(line);
            flush ??= setTimeout(() => {
              flush = null;
              const batch = pending.splice(0);
              setLines((ls) => ls.concat(batch));
            }, 50);
          } else if (e.event === "state" && e.data && typeof e.data === "object") {
            const state = (e.data as { state?: JobState }).state;
            if (state) setJob((j) => (j ? { ...j, state } : j));
          } else if (e.event === "done" && e.data && typeof e.data === "object") {
            setJob(e.data as Job);
            setLogNote("The job has ended.");
          }
        },
      });
      tailRef.current = tail;
      tail.start();
    })();

    return () => {
      stopped = true;
      controller.abort();
      tailRef.current?.stop();
      tailRef.current = null;
    };
  }, [id]);

  const cancel = async () => {
    setCancelling(true);
    setCancelError(undefined);
    try {
      const j = ok(await api().POST("/v1/jobs/{id}/cancel", { params: { path: { id } } }));
      setJob(j);
    } catch (e) {
      setCancelError(asApiError(e));
    } finally {
      setCancelling(false);
    }
  };

  if (error) {
    return (
      <section>
        <h1>Job {id}</h1>
        <ErrorView error={error} title="Could not read the job" />
        <p>
          <Link href={href("/jobs")}>All jobs</Link>
        </p>
      </section>
    );
  }
  if (!job) return <Loading what="the job" />;

  const finished = isFinished(job.state);
  const origin = location.origin;

  return (
    <section aria-labelledby="job-title">
      <p class="crumbs">
        <Link href={href("/jobs")}>Jobs</Link> /
      </p>
      <h1 id="job-title">
        Job <code class="id">{job.id}</code>
      </h1>
      <div class="actions">
        {!finished ? (
          <button type="button" class="danger" onClick={cancel} disabled={cancelling}>
            {cancelling ? "Cancelling…" : "Cancel job"}
          </button>
        ) : null}
        <CopyButton label="Copy as curl" text={() => curlSnippet(origin, job.id, finished, request)} />
        <CopyButton label="Copy as Python" text={() => pythonSnippet(origin, job.id, finished, request)} />
      </div>
      <ErrorView error={cancelError} title="Cancel failed" />
      <dl class="facts">
        <dt>State</dt>
        <dd data-testid="job-state">
          <StateBadge state={job.state} />
        </dd>
        <dt>Source</dt>
        <dd>{job.source ? <Badge kind={`source-${job.source}`}>{job.source}</Badge> : "—"}</dd>
        <dt>Exit code</dt>
        <dd>{job.exit_code ?? "—"}</dd>
        <dt>Error</dt>
        <dd>
          {job.error ? (
            <span class="job-error">
              <code>{job.error.code}</code> {job.error.message}
            </span>
          ) : (
            "—"
          )}
        </dd>
        <dt>Kind</dt>
        <dd>{job.kind.replace("_", " ")}</dd>
        <dt>Caller</dt>
        <dd>
          <Link href={href(`/jobs?caller=${encodeURIComponent(job.caller)}`)}>{job.caller}</Link>
        </dd>
        <dt>Profile</dt>
        <dd>{job.profile}</dd>
        <dt>Priority</dt>
        <dd>{job.priority}</dd>
        <dt>Attempts</dt>
        <dd>{job.attempts}</dd>
        <dt>Accepted</dt>
        <dd>
          <Time iso={job.created_at} />
        </dd>
        <dt>Started</dt>
        <dd>
          <Time iso={job.started_at} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time iso={job.finished_at} />
        </dd>
        <dt>Pods</dt>
        <dd>
          {job.pods.length === 0
            ? "—"
            : job.pods.map((p, rank) => (
                <span key={p} class="pod-link">
                  <Link href={href(`/pods/${encodeURIComponent(p)}`)} aria-label={`Pod ${p} (rank ${rank})`}>
                    {p}
                  </Link>{" "}
                </span>
              ))}
        </dd>
      </dl>
      {finished ? <Waterfall timing={job.timing} /> : <p class="muted">The timing waterfall is shown once the job has ended.</p>}
      <div class="io">
        <section aria-labelledby="input-title">
          <h2 id="input-title">Input</h2>
          {request ? (
            <Json value={request.input ?? null} label="Input JSON" />
          ) : requestError ? (
            <ErrorView error={requestError} title="Could not read the job's input" />
          ) : (
            <p class="muted">Loading…</p>
          )}
        </section>
        <section aria-labelledby="output-title">
          <h2 id="output-title">Output</h2>
          <Json value={job.output} label="Output JSON" />
        </section>
      </div>
      <h2>
        stdout and stderr{" "}
        {tailStatus ? (
          <span
            class={`tail-status tail-${tailStatus}`}
            role="status"
            data-testid="tail-status"
            data-reconnects={reconnects}
            title={reconnects > 0 ? `Reconnected ${reconnects} times, resuming after the last event each time` : undefined}
          >
            {STATUS_TEXT[tailStatus]}
          </span>
        ) : null}
        {job.stdout_truncated || job.stderr_truncated ? <Badge kind="warn">truncated</Badge> : null}
      </h2>
      <LogView lines={lines} live={!finished} note={logNote} />
      {!finished && tailStatus ? (
        <p>
          <button type="button" class="link" onClick={() => tailRef.current?.reconnect()}>
            Reconnect the live tail
          </button>
        </p>
      ) : null}
    </section>
  );
}
