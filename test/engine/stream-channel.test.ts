/**
 * The caller's side of a healed stream (src/engine/stream-channel.ts), on its own: chunks queued
 * for a slow reader or handed to a waiting one, the end and the error each delivered once, the
 * restart marker, and an early stop that cancels the call once.
 */
import { describe, expect, it } from "vitest";
import {
  isStreamRestart,
  StreamCancelledReason,
  StreamChannel,
  StreamRestart,
} from "../../src/engine/stream-channel.js";

function channel() {
  const cancels: unknown[] = [];
  const ch = new StreamChannel<string | StreamRestart>((reason) => cancels.push(reason));
  return { ch, cancels };
}

describe("StreamChannel", () => {
  it("queues chunks for a reader that is behind, in order, and counts them", async () => {
    const { ch } = channel();
    ch.push("a");
    ch.push("b");
    ch.push("c");
    expect(ch.delivered).toBe(3);
    expect(await ch.next()).toEqual({ value: "a", done: false });
    ch.push("d"); // pushed while the queue still holds b and c
    expect(await ch.next()).toEqual({ value: "b", done: false });
    expect(await ch.next()).toEqual({ value: "c", done: false });
    expect(await ch.next()).toEqual({ value: "d", done: false });
    ch.push("e"); // the queue emptied and reused
    ch.end();
    expect(await ch.next()).toEqual({ value: "e", done: false });
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });

  it("hands a chunk straight to a reader that waits", async () => {
    const { ch } = channel();
    const waiting = ch.next();
    ch.push("a");
    expect(await waiting).toEqual({ value: "a", done: false });
    const ending = ch.next();
    ch.end();
    expect(await ending).toEqual({ value: undefined, done: true });
  });

  it("after its end takes nothing more: a push, a second end, a failure", async () => {
    const { ch } = channel();
    ch.end();
    ch.push("late");
    ch.fail(new Error("late"));
    ch.end();
    expect(ch.delivered).toBe(0);
    expect(await ch.next()).toEqual({ value: undefined, done: true });
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });

  it("delivers what it holds before its error, the error once, then the end", async () => {
    const { ch } = channel();
    const error = new Error("cut");
    ch.push("a");
    ch.fail(error);
    ch.fail(new Error("second"));
    ch.push("late");
    expect(await ch.next()).toEqual({ value: "a", done: false });
    await expect(ch.next()).rejects.toBe(error);
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });

  it("rejects a waiting reader with the error, once", async () => {
    const { ch } = channel();
    const waiting = ch.next();
    const error = new Error("cut");
    ch.fail(error);
    await expect(waiting).rejects.toBe(error);
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });

  it("a restart marker is a chunk for the reader; the count starts again after it", async () => {
    const { ch } = channel();
    ch.push("a");
    ch.push("b");
    const marker = new StreamRestart(2, 2, "q", new Error("stalled"));
    ch.restart(marker);
    expect(ch.delivered).toBe(0);
    expect(ch.restarts).toBe(1);
    ch.push("A");
    expect(ch.delivered).toBe(1);
    const items: unknown[] = [];
    ch.end();
    for await (const item of ch) items.push(item);
    expect(items).toEqual(["a", "b", marker, "A"]);
    expect(isStreamRestart(items[2])).toBe(true);
  });

  it("a reader that stops early cancels the call once and empties the queue", async () => {
    const { ch, cancels } = channel();
    ch.push("a");
    ch.push("b");
    for await (const item of ch) {
      expect(item).toBe("a");
      break;
    }
    expect(cancels).toHaveLength(1);
    expect(cancels[0]).toBeInstanceOf(StreamCancelledReason);
    expect((cancels[0] as Error).name).toBe("AbortError");
    expect((cancels[0] as Error).message).toBe(
      "selfheal: the stream's reader stopped before its end",
    );
    expect(await ch.next()).toEqual({ value: undefined, done: true });
    await ch.return();
    expect(cancels).toHaveLength(1);
    ch.push("late");
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });

  it("a reader that stops after the end cancels nothing", async () => {
    const { ch, cancels } = channel();
    ch.push("a");
    ch.end();
    await ch.return();
    expect(cancels).toEqual([]);
    expect(await ch.next()).toEqual({ value: undefined, done: true });
  });
});

describe("isStreamRestart", () => {
  it("is true for a marker, false for anything else", () => {
    expect(isStreamRestart(new StreamRestart(0, 1, undefined, undefined))).toBe(true);
    for (const value of [null, undefined, "restart", 1, {}, { discard: 1 }, () => undefined])
      expect(isStreamRestart(value), typeof value).toBe(false);
    // A marker from another copy of the package carries the same registered symbol.
    expect(isStreamRestart({ [Symbol.for("selfheal:stream-restart")]: true })).toBe(true);
  });
});
