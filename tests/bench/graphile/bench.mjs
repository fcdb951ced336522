// graphile-worker 0.16.6 in a closed loop, for `cargo bench -p hearth-tests
// --bench service`: `clients` loops each add a no-op job and wait until the
// worker has completed it (its completion committed), for `seconds`.
// Prints one JSON line: jobs/s, the round trip's p50/p99 in ms, the jobs
// measured and the CPU they cost in ms (`cpu`: every postgres process, this
// process, the machine's busy time; counted from /proc as the Rust side
// counts Hearth's).
//
//   node bench.mjs <postgres url> <clients> <seconds>
import { readdirSync, readFileSync } from "node:fs";
import { Logger, makeWorkerUtils, run } from "graphile-worker";

// CPU time since boot in ms; /proc counts in USER_HZ, 100 a second.
function cpuNow() {
  let postgres = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(pid)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(")");
    if (stat.slice(stat.indexOf("(") + 1, close) !== "postgres") continue;
    // After the comm: state, ppid, ..., utime (11), stime, cutime, cstime.
    const f = stat.slice(close + 2).split(" ").map(Number);
    postgres += (f[11] + f[12] + f[13] + f[14]) * 10;
  }
  // user nice system idle iowait irq softirq steal
  const c = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const { user, system } = process.cpuUsage();
  return { postgres, worker: (user + system) / 1000, machine: (c[0] + c[1] + c[2] + c[5] + c[6] + c[7]) * 10 };
}

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
const before = cpuNow();
const start = performance.now();
const until = start + seconds * 1000;
await Promise.all(Array.from({ length: clients }, () => loop(until, rtts)));
const elapsed = (performance.now() - start) / 1000;
const after = cpuNow();
const cpu = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
rtts.sort((a, b) => a - b);
const pct = (p) => rtts[Math.min(rtts.length - 1, Math.floor(p * rtts.length))];
console.log(
  JSON.stringify({ jobs_per_s: rtts.length / elapsed, p50_ms: pct(0.5), p99_ms: pct(0.99), jobs: rtts.length, cpu }),
);
await runner.stop();
await utils.release();
