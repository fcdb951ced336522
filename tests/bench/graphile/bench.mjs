// graphile-worker 0.16.6 in a closed loop, for `cargo bench -p hearth-tests
// --bench service`: `clients` loops each add a no-op job and wait until the
// worker has completed it (its completion committed), for `seconds`.
// Prints one JSON line: jobs/s and the round trip's p50/p99 in ms.
//
//   node bench.mjs <postgres url> <clients> <seconds>
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const [url, clientsArg, secondsArg] = process.argv.slice(2);
const clients = Number(clientsArg);
const seconds = Number(secondsArg);
if (!url || !(clients > 0) || !(seconds > 0)) {
  console.error("usage: node bench.mjs <postgres url> <clients> <seconds>");
  process.exit(2);
}

const quiet = new Logger(() => () => {});
const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
await utils.migrate();
const runner = await run({
  connectionString: url,
  concurrency: clients,
  noHandleSignals: true,
  pollInterval: 2000,
  logger: quiet,
  taskList: { noop: async () => {} },
});

// A completion may be seen before its caller starts waiting for it.
const waiting = new Map();
const early = new Set();
runner.events.on("job:complete", ({ job, error }) => {
  if (error) {
    console.error(`job ${job.id} failed: ${error}`);
    process.exit(1);
  }
  const wake = waiting.get(job.id);
  if (wake) {
    waiting.delete(job.id);
    wake();
  } else {
    early.add(job.id);
  }
});
const completed = (id) =>
  early.delete(id) ? Promise.resolve() : new Promise((wake) => waiting.set(id, wake));

async function loop(until, rtts) {
  while (performance.now() < until) {
    const t0 = performance.now();
    const job = await utils.addJob("noop", {});
    await completed(job.id);
    rtts?.push(performance.now() - t0);
  }
}

// Warm up the pools and plans, then measure.
await Promise.all(Array.from({ length: clients }, () => loop(performance.now() + 500)));
const rtts = [];
const start = performance.now();
const until = start + seconds * 1000;
await Promise.all(Array.from({ length: clients }, () => loop(until, rtts)));
const elapsed = (performance.now() - start) / 1000;
rtts.sort((a, b) => a - b);
const pct = (p) => rtts[Math.min(rtts.length - 1, Math.floor(p * rtts.length))];
console.log(JSON.stringify({ jobs_per_s: rtts.length / elapsed, p50_ms: pct(0.5), p99_ms: pct(0.99) }));
await runner.stop();
await utils.release();
