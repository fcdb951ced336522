/** Times and durations as the console shows them, in local time or UTC. */

import { Store, useStore } from "./store.js";

export type Zone = "local" | "utc";

const KEY = "hearth.console.zone";

function initialZone(): Zone {
  try {
    return globalThis.localStorage?.getItem(KEY) === "utc" ? "utc" : "local";
  } catch {
    return "local";
  }
}

/** Local time or UTC: a display preference (the only thing kept in localStorage). */
export const zone = new Store<Zone>(initialZone());

export function setZone(z: Zone): void {
  zone.set(z);
  try {
    globalThis.localStorage?.setItem(KEY, z);
  } catch {
    // Storage refused: the preference lasts for this page only.
  }
}

export function useZone(): Zone {
  return useStore(zone);
}

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

/** `2026-12-01 14:27:09` (local) or `2026-12-01 14:27:09Z` (UTC); `—` for none. */
export function formatTime(iso: string | null | undefined, z: Zone): string {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  if (z === "utc") {
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(
      d.getUTCMinutes(),
    )}:${pad(d.getUTCSeconds())}Z`;
  }
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(
    d.getMinutes(),
  )}:${pad(d.getSeconds())}`;
}

/** A clock time only (charts): `14:27` / `14:27Z`. */
export function formatClock(ms: number, z: Zone): string {
  const d = new Date(ms);
  return z === "utc" ? `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}Z` : `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** `812 ms`, `4.2 s`, `3 min 20 s`, `2 h 5 min`. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${m - h * 60} min`;
}

/** Relative ranges the jobs filter offers, in milliseconds. */
export const RANGES: Readonly<Record<string, number>> = {
  "15m": 15 * 60_000,
  "1h": 3_600_000,
  "6h": 6 * 3_600_000,
  "24h": 24 * 3_600_000,
  "7d": 7 * 24 * 3_600_000,
};

/**
 * An RFC 3339 instant from what a person typed: RFC 3339 itself, or
 * `YYYY-MM-DD[ HH:MM[:SS]]` read in the chosen zone. `null` if unreadable.
 */
export function parseInstant(text: string, z: Zone): string | null {
  const t = text.trim();
  if (t === "") return null;
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(t)) {
    const d = new Date(t);
    return Number.isNaN(d.getTime()) ? null : d.toISOString();
  }
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(t);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map((v) => (v === undefined ? 0 : Number(v))) as number[];
  const date =
    z === "utc"
      ? new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!))
      : new Date(y!, mo! - 1, d!, h!, mi!, s!);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}
