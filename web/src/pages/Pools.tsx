/**
 * The pools: pods by state, GPU shares held, the budget and its inputs, the
 * start-latency objective and where it stands, the standby target, queue depth and the tenant's callers' keep-alive, with a
 * chart of GPUs held over the last hour, from the history the leading
 * replica keeps of each pool (`GET /v1/pools/{profile}/history`).
 */

import { api, ok, type Schemas } from "../api.js";
import { ErrorView, Loading, num } from "../components/common.js";
import { DataTable } from "../components/DataTable.js";
import { LineChart, type Series } from "../components/LineChart.js";
import { useResource, useTitle } from "../hooks.js";
import { formatDuration } from "../time.js";

type Pool = Schemas["PoolResponse"];
type History = Schemas["PoolHistoryResponse"];

const REFRESH_MS = 5000;
const HOUR_MS = 3_600_000;

/** A pool's start-latency objective and where it stands, in words. */
export function objectiveText(o: Pool["objective"]): string {
  if (!o) return "none (this policy has no objective)";
  const pct = (share: number) => `${Math.round(share * 1000) / 10} %`;
  const aim = `p${Math.round(o.percentile * 1000) / 10} ${o.class} start`;
  const recent = o.warm_share == null ? "no jobs yet" : `${pct(o.warm_share)} of recent jobs started warm`;
  return `${aim}: ${pct(o.predicted)} predicted within it, ${recent}`;
}

export function heldGpus(p: Pool): number {
  const h = p.gpus.held_gpus;
  return h.active + h.warm + h.standby + h.draining;
}

/** A pool's history as a chart series: all the GPUs it held, by time. */
export function gpuSeries(history: History): Series {
  return {
    name: history.profile,
    samples: history.samples.map((s) => ({
      t: Date.parse(s.at),
      v: s.active + s.warm + s.standby + s.draining,
    })),
  };
}

function Counts({ caption, values }: { caption: string; values: Record<string, number> }) {
  return (
    <table class="counts">
      <caption>{caption}</caption>
      <tbody>
        {Object.entries(values).map(([k, v]) => (
          <tr key={k}>
            <th scope="row">{k}</th>
            <td class="num">{num(v, 3)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function PoolCard({ pool }: { pool: Pool }) {
  const b = pool.budget;
  return (
    <article class="card pool" aria-labelledby={`pool-${pool.profile}`}>
      <h2 id={`pool-${pool.profile}`}>
        {pool.profile} <span class="muted small">policy {pool.policy}</span>
      </h2>
      <dl class="facts compact">
        <dt>Queue</dt>
        <dd>
          {pool.queued_jobs} jobs ({pool.queued_pods} pods) waiting
        </dd>
        <dt>Objective</dt>
        <dd>{objectiveText(pool.objective)}</dd>
        <dt>Standby target</dt>
        <dd>{pool.standby_target} pods</dd>
        <dt>GPUs</dt>
        <dd>
          {pool.gpus.inventory === 0
            ? "none (a CPU profile)"
            : `${num(heldGpus(pool))} held of ${pool.gpus.inventory} (${pool.gpus.kind}), ${num(pool.gpus.free_gpus)} free, ${pool.gpus.shares_per_gpu} shares per GPU`}
        </dd>
        <dt>Budget</dt>
        <dd>{b ? `${num(b.budget_gpus)} GPUs for warm and standby pods` : "none (this policy has no budget)"}</dd>
        <dt>Your share</dt>
        <dd>
          {num(pool.tenant.warm_gpus)} GPUs warm, budget {pool.tenant.budget_gpus == null ? "—" : num(pool.tenant.budget_gpus)}, floor{" "}
          {num(pool.tenant.floor_gpus)}, ceiling {pool.tenant.ceiling_gpus == null ? "unbounded" : num(pool.tenant.ceiling_gpus)},{" "}
          {pool.tenant.queued_pods} pods queued
        </dd>
      </dl>
      <div class="count-tables">
        <Counts caption="Pods by state" values={{ ...pool.pods }} />
        <Counts caption="GPU shares held" values={{ ...pool.gpus.held_shares }} />
        {b ? (
          <Counts
            caption="Budget inputs"
            values={{
              "arrival rate (pods/s)": b.inputs.arrival_rate_per_s,
              "demand (GPUs)": b.inputs.demand_gpus,
              "floor (GPUs)": b.inputs.floor_gpus,
              ...(b.inputs.ceiling_gpus == null ? {} : { "ceiling (GPUs)": b.inputs.ceiling_gpus }),
              "queued pods": b.inputs.queued_pods,
              "standby target": b.inputs.standby_target,
            }}
          />
        ) : null}
      </div>
      <DataTable
        caption={`Your callers in ${pool.profile}: keep-alive of their warm pods`}
        columns={[
          { header: "Caller", cell: (c) => c.caller },
          { header: "Warm pods", cell: (c) => c.warm_pods, class: "num" },
          { header: "In flight", cell: (c) => c.in_flight, class: "num" },
          { header: "Keep-alive", cell: (c) => (c.keep_alive_ms == null ? "not kept / no expiry" : formatDuration(c.keep_alive_ms)), class: "num" },
          { header: "Pauses seen", cell: (c) => c.pauses, class: "num" },
        ]}
        rows={pool.callers}
        rowKey={(c) => c.caller}
        empty="None of your callers holds or recently held a pod here."
      />
    </article>
  );
}

export function Pools() {
  useTitle("Pools");
  const pools = useResource(
    async (signal) => {
      const answer = ok(await api().GET("/v1/pools", { signal }));
      const histories = await Promise.all(
        answer.pools
          .filter((p) => p.gpus.inventory > 0)
          .map(async (p) =>
            ok(await api().GET("/v1/pools/{profile}/history", { params: { path: { profile: p.profile } }, signal })),
          ),
      );
      return { ...answer, histories };
    },
    [],
    { refreshMs: REFRESH_MS },
  );
  const data = pools.data;
  const now = Date.now();
  return (
    <section aria-labelledby="pools-title">
      <h1 id="pools-title">Pools</h1>
      <ErrorView error={pools.error} title="Could not read the pools" />
      {pools.loading && !data ? <Loading what="pools" /> : null}
      {data ? (
        <>
          <p class={data.leader.is_leader ? "muted" : "notice"}>
            {data.leader.is_leader
              ? `This replica leads (${data.leader.host ?? "?"}).`
              : `This replica does not lead: its pools read empty. Leader: ${data.leader.replica_id ?? "none at the moment"} on ${data.leader.host ?? "?"}.`}
          </p>
          <section aria-labelledby="gpu-chart-title">
            <h2 id="gpu-chart-title">GPUs held, last hour</h2>
            <p class="muted small">
              Active, warm, standby and draining GPUs together, as the leading replica sampled them
              {data.histories[0] ? ` every ${data.histories[0].step_s} s` : ""} (a new leader starts a new history).
            </p>
            {data.histories.length > 0 ? (
              <LineChart
                series={data.histories.map(gpuSeries)}
                from={now - HOUR_MS}
                to={now}
                label="GPUs held by pool over the last hour"
                unit="GPUs"
              />
            ) : (
              <p class="muted">No pool of this service has GPUs.</p>
            )}
          </section>
          {data.pools.map((p) => (
            <PoolCard pool={p} key={p.profile} />
          ))}
        </>
      ) : null}
    </section>
  );
}
