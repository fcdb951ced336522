/**
 * A job's live event stream (`GET /v1/jobs/{id}/events`) that survives a
 * reconnect. While the connection drops and the browser's `EventSource`
 * reconnects by itself, it sends `Last-Event-ID` and the service resumes
 * after it. When the `EventSource` gives up (an error answer, a proxy that
 * cut it), a new one is opened with `?after=<last id>`, with a growing delay.
 * Events are numbered per job; any id at or below the last one seen is
 * dropped, so no line shows twice whatever the transport does.
 */

export type TailStatus = "connecting" | "live" | "reconnecting" | "ended";

export interface TailEvent {
  id: number;
  event: "state" | "output" | "done";
  data: unknown;
}

export interface OutputLine {
  id: number;
  stream: "stdout" | "stderr";
  rank: number;
  line: string;
}

/** The part of `EventSource` the tail uses (a fake in tests). */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((ev: Event) => unknown) | null;
  onerror: ((ev: Event) => unknown) | null;
  addEventListener(type: string, listener: (ev: MessageEvent) => void): void;
  close(): void;
}

export type EventSourceFactory = (url: string) => EventSourceLike;

export interface TailOptions {
  /** The events URL, without query. */
  url: string;
  onEvent: (event: TailEvent) => void;
  onStatus?: (status: TailStatus, attempt: number) => void;
  open?: EventSourceFactory;
  /**
   * Asked before a new connection is opened by hand (after the browser gave
   * up): false stops the tail (the job or the session is gone).
   */
  beforeReconnect?: () => Promise<boolean>;
  /** First delay before opening a new connection; doubles to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
}

const CLOSED = 2;

export class Tail {
  /** Id of the last event received; -1 before the first. */
  lastId = -1;
  private source: EventSourceLike | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private attempt = 0;
  private stopped = false;
  private readonly open: EventSourceFactory;

  constructor(private readonly options: TailOptions) {
    this.open =
      options.open ?? ((url) => new EventSource(url, { withCredentials: true }) as unknown as EventSourceLike);
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.source?.close();
    this.source = null;
  }

  /** Drops the connection and opens a new one that resumes after the last event. */
  reconnect(): void {
    if (this.stopped) return;
    this.source?.close();
    this.source = null;
    this.connect();
  }

  private status(s: TailStatus): void {
    this.options.onStatus?.(s, this.attempt);
  }

  private connect(): void {
    const url = this.lastId >= 0 ? `${this.options.url}?after=${this.lastId}` : this.options.url;
    this.status(this.attempt === 0 ? "connecting" : "reconnecting");
    const source = this.open(url);
    this.source = source;
    source.onopen = () => {
      if (this.source !== source) return;
      this.attempt = 0;
      this.status("live");
    };
    source.onerror = () => {
      if (this.source !== source || this.stopped) return;
      if (source.readyState === CLOSED) {
        // The browser gave up on this one: open another after a pause.
        source.close();
        this.source = null;
        this.attempt += 1;
        const base = this.options.retryMs ?? 1000;
        const delay = Math.min(this.options.maxRetryMs ?? 10_000, base * 2 ** (this.attempt - 1));
        this.status("reconnecting");
        this.timer = setTimeout(() => {
          this.timer = null;
          if (this.stopped) return;
          const ask = this.options.beforeReconnect;
          if (!ask) {
            this.connect();
            return;
          }
          ask().then(
            (go) => {
              if (this.stopped) return;
              if (go) this.connect();
              else {
                this.stop();
                this.status("ended");
              }
            },
            () => {
              if (!this.stopped) this.connect();
            },
          );
        }, delay);
      } else {
        // The browser reconnects by itself, with Last-Event-ID.
        this.attempt += 1;
        this.status("reconnecting");
      }
    };
    for (const name of ["state", "output", "done"] as const) {
      source.addEventListener(name, (ev: MessageEvent) => {
        if (this.source !== source) return;
        const id = Number(ev.lastEventId);
        if (!Number.isFinite(id) || id <= this.lastId) return;
        let data: unknown;
        try {
          data = JSON.parse(String(ev.data));
        } catch {
          data = ev.data;
        }
        this.lastId = id;
        this.options.onEvent({ id, event: name, data });
        if (name === "done") {
          this.stop();
          this.status("ended");
        }
      });
    }
  }
}

/** An `output` event's line, if it is one. */
export function outputLine(e: TailEvent): OutputLine | null {
  if (e.event !== "output" || !e.data || typeof e.data !== "object") return null;
  const d = e.data as Record<string, unknown>;
  if (typeof d.line !== "string") return null;
  return {
    id: e.id,
    stream: d.stream === "stderr" ? "stderr" : "stdout",
    rank: typeof d.rank === "number" ? d.rank : 0,
    line: d.line,
  };
}

/** A stored log (`GET /v1/jobs/{id}/logs`) as lines, stdout first. */
export function logLines(logs: { stdout: string; stderr: string }): OutputLine[] {
  const out: OutputLine[] = [];
  let id = 0;
  for (const stream of ["stdout", "stderr"] as const) {
    const text = logs[stream];
    if (!text) continue;
    const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
    for (const line of lines) out.push({ id: id++, stream, rank: 0, line });
  }
  return out;
}
