/**
 * A job's timing as a waterfall: queued, acquire, bind and run one after the
 * other on one time axis (the rest of `total_ms`, recording the end, last).
 */

import type { Schemas } from "../api.js";
import { formatDuration } from "../time.js";

export interface Phase {
  name: string;
  label: string;
  start: number;
  ms: number;
}

export function phases(t: Schemas["Timing"]): Phase[] {
  const list: Phase[] = [];
  let at = 0;
  const add = (name: string, label: string, ms: number) => {
    const v = Math.max(0, ms || 0);
    list.push({ name, label, start: at, ms: v });
    at += v;
  };
  add("queued", "Queued", t.queued_ms);
  add("acquire", "Acquire", t.acquire_ms);
  add("bind", "Bind", t.bind_ms);
  add("run", "Run", t.run_ms);
  const rest = (t.total_ms || 0) - at;
  if (rest > 0) add("finish", "Finish", rest);
  return list;
}

export function Waterfall({ timing }: { timing: Schemas["Timing"] }) {
  const list = phases(timing);
  const total = Math.max(timing.total_ms || 0, list.reduce((s, p) => s + p.ms, 0), 1);
  const summary = list.map((p) => `${p.label} ${formatDuration(p.ms)}`).join(", ");
  return (
    <figure class="waterfall">
      <figcaption>
        Timing, {formatDuration(timing.total_ms)} in all
      </figcaption>
      <div class="waterfall-rows" role="img" aria-label={`Timing waterfall: ${summary}`}>
        {list.map((p) => (
          <div class="waterfall-row" key={p.name}>
            <span class="waterfall-label">{p.label}</span>
            <span class="waterfall-track">
              <span
                class={`waterfall-bar phase-${p.name}`}
                data-phase={p.name}
                style={{
                  marginLeft: `${(100 * p.start) / total}%`,
                  width: `${Math.max((100 * p.ms) / total, p.ms > 0 ? 0.5 : 0)}%`,
                }}
              />
            </span>
            <span class="waterfall-ms">{formatDuration(p.ms)}</span>
          </div>
        ))}
      </div>
    </figure>
  );
}
