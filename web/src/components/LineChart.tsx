/** A small SVG line chart of samples over a fixed time window. */

import { formatClock, useZone } from "../time.js";

export interface Sample {
  t: number;
  v: number;
}

export interface Series {
  name: string;
  samples: Sample[];
}

const W = 640;
const H = 180;
const PAD = { left: 40, right: 12, top: 12, bottom: 24 };

export function LineChart({
  series,
  from,
  to,
  label,
  unit,
}: {
  series: Series[];
  from: number;
  to: number;
  label: string;
  unit: string;
}) {
  const z = useZone();
  const max = Math.max(1, ...series.flatMap((s) => s.samples.map((p) => p.v)));
  const x = (t: number) => PAD.left + ((t - from) / Math.max(1, to - from)) * (W - PAD.left - PAD.right);
  const y = (v: number) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => from + f * (to - from));
  const last = series.map((s) => `${s.name}: ${s.samples.at(-1)?.v ?? 0} ${unit}`).join(", ");
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${label}. Now ${last || "no samples"}.`}>
        <line class="axis" x1={PAD.left} y1={y(0)} x2={W - PAD.right} y2={y(0)} />
        <line class="axis" x1={PAD.left} y1={PAD.top} x2={PAD.left} y2={y(0)} />
        <text class="tick" x={PAD.left - 6} y={y(max) + 4} text-anchor="end">
          {Number.isInteger(max) ? max : max.toFixed(2)}
        </text>
        <text class="tick" x={PAD.left - 6} y={y(0) + 4} text-anchor="end">
          0
        </text>
        {ticks.map((t, i) => (
          <text class="tick" key={t} x={x(t)} y={H - 6} text-anchor={i === 0 ? "start" : i === ticks.length - 1 ? "end" : "middle"}>
            {formatClock(t, z)}
          </text>
        ))}
        {series.map((s, i) => {
          const pts = s.samples.filter((p) => p.t >= from);
          if (pts.length === 0) return null;
          // A step line: a held amount stays until the next sample.
          const d =
            pts
              .map((p, j) => {
                const prev = pts[j - 1];
                return j === 0 ? `M${x(p.t)},${y(p.v)}` : `L${x(p.t)},${y(prev!.v)} L${x(p.t)},${y(p.v)}`;
              })
              .join(" ") + ` L${x(to)},${y(pts.at(-1)!.v)}`;
          const lastPoint = pts.at(-1)!;
          return (
            <g key={s.name} class={`series-${i % 6}`}>
              <path class={`series series-${i % 6}`} d={d} fill="none" />
              <circle class="dot" cx={x(lastPoint.t)} cy={y(lastPoint.v)} r={3} />
            </g>
          );
        })}
      </svg>
      <figcaption>
        {series.map((s, i) => (
          <span key={s.name} class={`legend series-${i % 6}`}>
            {s.name}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
