/**
 * stdout and stderr lines with an in-place search: matches are highlighted,
 * counted and stepped through (Enter / Shift+Enter), optionally with only
 * the matching lines shown. Follows the tail while scrolled to the bottom.
 */

import { useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";

import type { OutputLine } from "../tail.js";

type StreamFilter = "all" | "stdout" | "stderr";

export function matchLines(lines: OutputLine[], query: string, caseSensitive = false): number[] {
  if (query === "") return [];
  const q = caseSensitive ? query : query.toLowerCase();
  const hits: number[] = [];
  lines.forEach((l, i) => {
    if ((caseSensitive ? l.line : l.line.toLowerCase()).includes(q)) hits.push(i);
  });
  return hits;
}

function Highlight({ text, query }: { text: string; query: string }) {
  if (query === "") return <>{text}</>;
  const lower = text.toLowerCase();
  const q = query.toLowerCase();
  const parts = [];
  let at = 0;
  for (;;) {
    const i = lower.indexOf(q, at);
    if (i < 0) break;
    if (i > at) parts.push(text.slice(at, i));
    parts.push(<mark key={i}>{text.slice(i, i + q.length)}</mark>);
    at = i + q.length;
  }
  parts.push(text.slice(at));
  return <>{parts}</>;
}

export function LogView({ lines, live, note }: { lines: OutputLine[]; live: boolean; note?: string }) {
  const [query, setQuery] = useState("");
  const [onlyMatches, setOnlyMatches] = useState(false);
  const [stream, setStream] = useState<StreamFilter>("all");
  // The match stepped to, reset in the same handler that changes the query or
  // the stream: an effect would run after paint and could undo an Enter
  // pressed just after typing.
  const [current, setCurrent] = useState(0);
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);

  const shown = useMemo(() => (stream === "all" ? lines : lines.filter((l) => l.stream === stream)), [lines, stream]);
  const hits = useMemo(() => matchLines(shown, query), [shown, query]);
  const hitSet = useMemo(() => new Set(hits), [hits]);
  const visible = onlyMatches && query !== "" ? hits.map((i) => ({ i, l: shown[i]! })) : shown.map((l, i) => ({ i, l }));

  useLayoutEffect(() => {
    const el = box.current;
    if (el && live && atBottom.current && query === "") el.scrollTop = el.scrollHeight;
  }, [lines.length, live, query]);

  const at = Math.min(current, Math.max(hits.length - 1, 0));

  const go = (delta: number) => {
    if (hits.length === 0) return;
    const next = (at + delta + hits.length) % hits.length;
    setCurrent(next);
    const el = box.current?.querySelector(`[data-index="${hits[next]}"]`);
    el?.scrollIntoView({ block: "nearest" });
  };

  return (
    <section class="logs" aria-label="Output">
      <div class="toolbar">
        <label>
          Search output{" "}
          <input
            type="search"
            value={query}
            placeholder="text in a line"
            onInput={(e) => {
              setQuery(e.currentTarget.value);
              setCurrent(0);
            }}
            onKeyDown={(e) => {
              if (e.key === "Enter") {
                e.preventDefault();
                go(e.shiftKey ? -1 : 1);
              }
            }}
          />
        </label>
        <span class="match-count" role="status" aria-live="polite">
          {query === "" ? "" : hits.length === 0 ? "no matches" : `${at + 1} of ${hits.length} matches`}
        </span>
        <button type="button" onClick={() => go(-1)} disabled={hits.length === 0} aria-label="Previous match">
          ↑
        </button>
        <button type="button" onClick={() => go(1)} disabled={hits.length === 0} aria-label="Next match">
          ↓
        </button>
        <label>
          <input type="checkbox" checked={onlyMatches} onChange={(e) => setOnlyMatches(e.currentTarget.checked)} /> only
          matching lines
        </label>
        <label>
          Stream{" "}
          <select
            value={stream}
            onChange={(e) => {
              setStream(e.currentTarget.value as StreamFilter);
              setCurrent(0);
            }}
          >
            <option value="all">stdout and stderr</option>
            <option value="stdout">stdout</option>
            <option value="stderr">stderr</option>
          </select>
        </label>
        <span class="muted">{lines.length === 1 ? "1 line" : `${lines.length} lines`}</span>
      </div>
      {note ? <p class="muted">{note}</p> : null}
      <div
        class="log-lines"
        ref={box}
        tabIndex={0}
        role="log"
        aria-label="Job output lines"
        aria-live={live ? "polite" : "off"}
        onScroll={(e) => {
          const el = e.currentTarget;
          atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {visible.map(({ i, l }) => (
          <div
            key={`${l.stream}-${l.id}`}
            data-index={i}
            class={`log-line ${l.stream}${hitSet.has(i) ? " hit" : ""}${hits[at] === i ? " current" : ""}`}
          >
            <span class="log-stream" aria-hidden="true">
              {l.stream === "stderr" ? "err" : "out"}
              {l.rank > 0 ? l.rank : ""}
            </span>
            <span class="log-text">
              <Highlight text={l.line} query={query} />
            </span>
          </div>
        ))}
        {lines.length === 0 ? <p class="muted">No output yet.</p> : null}
      </div>
    </section>
  );
}
