import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { outputLine, Tail, type EventSourceLike, type TailEvent, type TailStatus } from "../src/tail.js";

/** An EventSource the test drives by hand. */
class FakeSource implements EventSourceLike {
  readyState = 0;
  onopen: ((ev: Event) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  closed = false;
  private listeners = new Map<string, ((ev: MessageEvent) => void)[]>();

  constructor(readonly url: string) {}

  addEventListener(type: string, listener: (ev: MessageEvent) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
    this.readyState = 2;
  }

  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }

  emit(type: string, id: number, data: unknown): void {
    const ev = new MessageEvent(type, { data: JSON.stringify(data), lastEventId: String(id) });
    for (const l of this.listeners.get(type) ?? []) l(ev);
  }

  /** The connection dropped; the browser will retry by itself (CONNECTING). */
  drop(): void {
    this.readyState = 0;
    this.onerror?.(new Event("error"));
  }

  /** The browser gave up (an error answer). */
  fail(): void {
    this.readyState = 2;
    this.onerror?.(new Event("error"));
  }
}

describe("live tail", () => {
  let sources: FakeSource[];
  let events: TailEvent[];
  let statuses: TailStatus[];
  let tail: Tail;

  beforeEach(() => {
    vi.useFakeTimers();
    sources = [];
    events = [];
    statuses = [];
    tail = new Tail({
      url: "/v1/jobs/j/events",
      onEvent: (e) => events.push(e),
      onStatus: (s) => statuses.push(s),
      open: (url) => {
        const s = new FakeSource(url);
        sources.push(s);
        return s;
      },
      retryMs: 100,
    });
  });
  afterEach(() => {
    tail.stop();
    vi.useRealTimers();
  });

  const line = (i: number) => ({ stream: "stdout", rank: 0, line: `tick ${i}` });

  it("replays from the start, then follows", () => {
    tail.start();
    expect(sources[0]!.url).toBe("/v1/jobs/j/events");
    sources[0]!.open();
    sources[0]!.emit("state", 0, { state: "queued" });
    sources[0]!.emit("state", 1, { state: "running" });
    sources[0]!.emit("output", 2, line(1));
    expect(events.map((e) => e.id)).toEqual([0, 1, 2]);
    expect(outputLine(events[2]!)).toEqual({ id: 2, stream: "stdout", rank: 0, line: "tick 1" });
    expect(statuses).toEqual(["connecting", "live"]);
  });

  it("drops events it already has when the browser resumes with Last-Event-ID", () => {
    tail.start();
    const s = sources[0]!;
    s.open();
    s.emit("output", 1, line(1));
    s.emit("output", 2, line(2));
    s.drop();
    expect(statuses.at(-1)).toBe("reconnecting");
    // A proxy that replays a little too much: event 2 again, then 3.
    s.open();
    s.emit("output", 2, line(2));
    s.emit("output", 3, line(3));
    expect(events.map((e) => e.id)).toEqual([1, 2, 3]);
    expect(statuses.at(-1)).toBe("live");
    expect(sources).toHaveLength(1);
  });

  it("opens a new stream after the last event when the browser gives up", () => {
    tail.start();
    sources[0]!.open();
    sources[0]!.emit("output", 1, line(1));
    sources[0]!.emit("output", 2, line(2));
    sources[0]!.fail();
    expect(sources[0]!.closed).toBe(true);
    expect(sources).toHaveLength(1);
    vi.advanceTimersByTime(100);
    expect(sources).toHaveLength(2);
    expect(sources[1]!.url).toBe("/v1/jobs/j/events?after=2");
    // Fails again: waits twice as long.
    sources[1]!.fail();
    vi.advanceTimersByTime(150);
    expect(sources).toHaveLength(2);
    vi.advanceTimersByTime(50);
    expect(sources).toHaveLength(3);
    sources[2]!.open();
    sources[2]!.emit("output", 3, line(3));
    expect(events.map((e) => e.id)).toEqual([1, 2, 3]);
  });

  it("resumes after the last event on a manual reconnect", () => {
    tail.start();
    sources[0]!.open();
    sources[0]!.emit("output", 4, line(4));
    tail.reconnect();
    expect(sources[0]!.closed).toBe(true);
    expect(sources[1]!.url).toBe("/v1/jobs/j/events?after=4");
    // Late events of the old stream are ignored.
    sources[0]!.emit("output", 5, line(5));
    expect(events.map((e) => e.id)).toEqual([4]);
  });

  it("stops when the job or the session is gone", async () => {
    const gone = new Tail({
      url: "/v1/jobs/j/events",
      onEvent: (e) => events.push(e),
      onStatus: (s) => statuses.push(s),
      open: (url) => {
        const s = new FakeSource(url);
        sources.push(s);
        return s;
      },
      retryMs: 100,
      beforeReconnect: async () => false,
    });
    gone.start();
    sources[0]!.open();
    sources[0]!.fail();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(sources).toHaveLength(1);
    expect(statuses.at(-1)).toBe("ended");
  });

  it("ends at done and does not reconnect", () => {
    tail.start();
    sources[0]!.open();
    sources[0]!.emit("done", 7, { id: "j", state: "succeeded" });
    expect(sources[0]!.closed).toBe(true);
    expect(statuses.at(-1)).toBe("ended");
    sources[0]!.fail();
    vi.advanceTimersByTime(10_000);
    expect(sources).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ event: "done", id: 7 });
  });
});
