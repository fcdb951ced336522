/** Usage: jobs by state and source, job-seconds and GPU-seconds by profile over a window. */

import { useState } from "preact/hooks";

import { api, ok } from "../api.js";
import { ErrorView, Loading, num, Time } from "../components/common.js";
import { DataTable } from "../components/DataTable.js";
import { useResource, useTitle } from "../hooks.js";

const WINDOWS: [number, string][] = [
  [3600, "the last hour"],
  [86400, "the last day"],
  [7 * 86400, "the last 7 days"],
  [30 * 86400, "the last 30 days"],
  [90 * 86400, "the last 90 days"],
];

function Breakdown({ caption, values }: { caption: string; values: Record<string, number> }) {
  const entries = Object.entries(values);
  return (
    <table class="counts">
      <caption>{caption}</caption>
      <tbody>
        {entries.length === 0 ? (
          <tr>
            <td class="muted">none</td>
          </tr>
        ) : (
          entries.map(([k, v]) => (
            <tr key={k}>
              <th scope="row">{k.replace("_", " ")}</th>
              <td class="num">{v}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

export function Usage() {
  useTitle("Usage");
  const [windowS, setWindowS] = useState(86400);
  const usage = useResource(
    async (signal) => ok(await api().GET("/v1/usage", { params: { query: { window_s: windowS } }, signal })),
    [windowS],
    { refreshMs: 30_000 },
  );
  const u = usage.data;
  return (
    <section aria-labelledby="usage-title">
      <h1 id="usage-title">Usage</h1>
      <div class="toolbar">
        <label>
          Jobs accepted in{" "}
          <select value={String(windowS)} onChange={(e) => setWindowS(Number(e.currentTarget.value))}>
            {WINDOWS.map(([s, label]) => (
              <option key={s} value={String(s)}>
                {label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorView error={usage.error} title="Could not read the usage" />
      {usage.loading && !u ? <Loading what="usage" /> : null}
      {u ? (
        <>
          <p>
            <strong data-testid="usage-jobs">{u.jobs}</strong> jobs accepted since <Time iso={u.since} />.
          </p>
          <div class="count-tables">
            <Breakdown caption="By state" values={u.by_state} />
            <Breakdown caption="By source of their pods" values={u.by_source} />
          </div>
          <DataTable
            caption="By profile"
            columns={[
              { header: "Profile", cell: (p) => p.profile },
              { header: "Jobs", cell: (p) => p.jobs, class: "num" },
              { header: "Job-seconds", cell: (p) => num(p.job_seconds, 1), class: "num" },
              { header: "GPU-seconds", cell: (p) => num(p.gpu_seconds, 1), class: "num" },
            ]}
            rows={u.profiles}
            rowKey={(p) => p.profile}
            empty="No jobs in this window."
          />
        </>
      ) : null}
    </section>
  );
}
