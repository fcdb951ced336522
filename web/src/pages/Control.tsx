/** Control: the tenant's registered policies and the live A, R_A, F, P*, U. */

import { useState } from "preact/hooks";

import { api, ok } from "../api.js";
import { ErrorView, Loading, num, pct, JobId, Time } from "../components/common.js";
import { DataTable } from "../components/DataTable.js";
import { useResource, useTitle } from "../hooks.js";

const WINDOWS = [10, 60, 300, 3600, 86400];
const REFRESH_MS = 5000;

export function Control() {
  useTitle("Control");
  const [windowS, setWindowS] = useState(60);
  const policies = useResource(async (signal) => ok(await api().GET("/v1/control/policies", { signal })).policies, []);
  const status = useResource(async (signal) => ok(await api().GET("/v1/control/status", { signal })), []);
  const stats = useResource(
    async (signal) => ok(await api().GET("/v1/control/stats", { params: { query: { window_s: windowS } }, signal })),
    [windowS],
    { refreshMs: REFRESH_MS },
  );
  const s = stats.data;
  return (
    <section aria-labelledby="control-title">
      <h1 id="control-title">Control</h1>
      <section aria-labelledby="stats-title">
        <h2 id="stats-title">Live accounting</h2>
        <div class="toolbar">
          <label>
            Window{" "}
            <select value={String(windowS)} onChange={(e) => setWindowS(Number(e.currentTarget.value))}>
              {WINDOWS.map((w) => (
                <option key={w} value={String(w)}>
                  {w < 60 ? `${w} s` : w < 3600 ? `${w / 60} min` : `${w / 3600} h`}
                </option>
              ))}
            </select>
          </label>
          <span class="muted">refreshed every {REFRESH_MS / 1000} s</span>
        </div>
        <ErrorView error={stats.error} title="Could not read the stats" />
        {stats.loading && !s ? <Loading what="stats" /> : null}
        {s ? (
          <>
            <dl class="metrics" aria-label="Shares">
              <div>
                <dt title="Share run in a batch of at least K_r, exactly, launched by its deadline">A</dt>
                <dd data-metric="a">{pct(s.a)}</dd>
              </div>
              <div>
                <dt title="(A − F)/(P* − F)">R_A</dt>
                <dd data-metric="r_a">{s.r_a == null ? "—" : num(s.r_a, 3)}</dd>
              </div>
              <div>
                <dt title="Fixed-partition share">F</dt>
                <dd data-metric="f">{pct(s.f)}</dd>
              </div>
              <div>
                <dt title="Offline optimum share">P*</dt>
                <dd data-metric="p_star">
                  {pct(s.p_star)}
                  {s.exact ? "" : ` (bounds ${pct(s.p_star_bounds.lower)} – ${pct(s.p_star_bounds.upper)})`}
                </dd>
              </div>
              <div>
                <dt title="Local upper bound share">U</dt>
                <dd data-metric="u">{pct(s.u)}</dd>
              </div>
              <div>
                <dt title="(P* − F)/(U − F)">G</dt>
                <dd>{s.g == null ? "—" : num(s.g, 3)}</dd>
              </div>
            </dl>
            <p class="muted small">
              {s.events} events in the last {s.window_s} s ({num(s.events_per_s, 1)}/s), {s.batches} batches,{" "}
              {s.deadline_misses} deadline misses, {pct(s.fallback_share)} on the CPU path ({s.late_fallbacks} late).{" "}
              {s.exact ? "P* is exact." : `P* is bounded: ${s.p_star_bounds.method}`} Coverage:{" "}
              {s.coverage.complete ? "complete" : "partial"}
              {s.coverage.before_start ? " (the window reaches before the service started)" : ""}. Executor: {s.executor}.
              Computed in {num(s.compute_ms, 1)} ms.
            </p>
          </>
        ) : null}
      </section>
      <section aria-labelledby="executor-title">
        <h2 id="executor-title">Executor</h2>
        <ErrorView error={status.error} />
        {status.data ? (
          <p>
            {status.data.status}: batches of up to {status.data.max_batch} events, default K{" "}
            {status.data.default_k ?? "none (CPU path only)"}, default deadline {status.data.default_deadline_ms} ms.
          </p>
        ) : null}
      </section>
      <section aria-labelledby="policies-title">
        <h2 id="policies-title">Policies</h2>
        <ErrorView error={policies.error} title="Could not list the policies" />
        {policies.data ? (
          <DataTable
            caption="Registered control policies"
            captionHidden
            columns={[
              { header: "Name", cell: (p) => p.name },
              { header: "Version", cell: (p) => p.version, class: "num" },
              { header: "Id", cell: (p) => <JobId id={p.policy_id} /> },
              { header: "Durability", cell: (p) => p.durability },
              { header: "Registers", cell: (p) => p.registers, class: "num" },
              { header: "Inputs", cell: (p) => p.inputs, class: "num" },
              { header: "Max steps", cell: (p) => p.max_steps, class: "num" },
              {
                header: "Routes (K_r)",
                cell: (p) => p.routes.map((r) => `${r.name} (${r.k ?? "CPU"}${r.calibrated ? ", calibrated" : ""})`).join(", "),
              },
              { header: "Registered", cell: (p) => <Time iso={p.created_at} /> },
            ]}
            rows={policies.data}
            rowKey={(p) => p.policy_id}
            empty="No control policy registered (POST /v1/control/policies)."
          />
        ) : null}
      </section>
    </section>
  );
}
