/**
 * One streamed attempt (src/engine/stream-attempt.ts) through `sh.stream`, on virtual time: what
 * it does with an in-band error before and after the first token, how the idle timer measures
 * silence, completion by finish reason or by end, the output tokens it reports, the caller's
 * abort, and what a stream function must return.
 */
import { describe, expect, it } from "vitest";
import {
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type ChunkInfo,
  type StreamFormat,
} from "../../src/index.js";
import type { VirtualClock } from "../../src/testing/index.js";
import { NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

/** A token, an in-band error, or the end with a finish reason (and maybe output tokens). */
type Part = { text: string } | { error: unknown } | { finish: string; tokens?: number };

const read = (p: Part): ChunkInfo | undefined =>
  "text" in p
    ? { token: true, answer: true }
    : "error" in p
      ? { error: p.error }
      : { finishReason: p.finish, ...(p.tokens !== undefined && { outputTokens: p.tokens }) };
const BY_FINISH: StreamFormat<Part> = { read, completion: "finish" };
const BY_END: StreamFormat<Part> = { read, completion: "end" };

/** A source that yields `parts`, each `gapMs` after the last, then ends (or hangs: "hang"). */
function source(clock: VirtualClock, parts: (Part | "hang")[], gapMs = 10) {
  const closed: boolean[] = [];
  async function* run(signal: AbortSignal): AsyncGenerator<Part> {
    try {
      for (const part of parts) {
        await clock.sleep(gapMs, signal);
        if (part === "hang") await clock.sleep(3_600_000, signal);
        else yield part;
      }
    } finally {
      closed.push(true);
    }
  }
  return { run, closed };
}

function setup() {
  const otel = recordingProvider();
  return { ...recoveryInstance(otel.provider, NO_RECOVERY), otel };
}

/** Reads the stream to its end on the clock: the parts, the error, the virtual time it took. */
async function drain(clock: VirtualClock, stream: AsyncIterable<Part>) {
  const started = clock.now();
  const parts: Part[] = [];
  const error = await clock.run(
    (async () => {
      for await (const p of stream) parts.push(p);
    })().then(
      () => undefined,
      (e: unknown) => e,
    ),
    { stepMs: 50 },
  );
  return { parts, error, ms: clock.now() - started };
}

describe("a streamed attempt", () => {
  it("an in-band error before the first token is the attempt's failure as it is", async () => {
    const { sh, clock } = setup();
    const overloaded = Object.assign(new Error("overloaded"), { status: 529 });
    const { run } = source(clock, [{ error: overloaded }]);
    const chat = sh.stream("chat", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      run(ctx.signal),
    );
    const { error } = await drain(clock, chat("hi"));
    expect(error).toBe(overloaded);
  });

  it("after the first token, the stream was cut: truncated, the in-band error as its cause", async () => {
    const { sh, clock } = setup();
    const overloaded = new Error("overloaded");
    const { run } = source(clock, [{ text: "Refunds" }, { error: overloaded }]);
    const chat = sh.stream("chat", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      run(ctx.signal),
    );
    const { parts, error } = await drain(clock, chat("hi"));
    expect(parts).toEqual([{ text: "Refunds" }, { error: overloaded }]);
    expect(isStreamInterruptedError(error)).toBe(true);
    const truncated = (error as Error).cause;
    expect(isStreamTruncatedError(truncated)).toBe(true);
    expect((truncated as Error).cause).toBe(overloaded);
  });

  it("a source that throws after a token is a cut, its error the cause", async () => {
    const { sh, clock } = setup();
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const chat = sh.stream("chat", { readOnly: true, format: BY_FINISH }, async function* () {
      await clock.sleep(10);
      yield { text: "Refunds" };
      throw reset;
    });
    const { error } = await drain(clock, chat("hi"));
    const truncated = (error as Error).cause as Error & { type?: string };
    expect(isStreamTruncatedError(truncated)).toBe(true);
    expect(truncated.cause).toBe(reset);
    expect(truncated.type).toBe("cut");
    expect((truncated as Error & { progress: { chunks: number } }).progress.chunks).toBe(1);
  });

  it("idleMs counts silence since the last chunk: steady chunks under it complete, a longer gap stalls", async () => {
    const { sh, clock } = setup();
    const steady = source(
      clock,
      [{ text: "a" }, { text: "b" }, { text: "c" }, { finish: "stop" }],
      1_000,
    );
    const ok = sh.stream(
      "steady",
      { readOnly: true, format: BY_FINISH, idleMs: 1_500 },
      (_: string, ctx) => steady.run(ctx.signal),
    );
    const done = await drain(clock, ok("hi"));
    expect(done.error).toBeUndefined();
    expect(done.parts).toHaveLength(4);
    const gappy = source(clock, [{ text: "a" }, { text: "b" }, { finish: "stop" }], 2_000);
    const stalls = sh.stream(
      "gappy",
      { readOnly: true, format: BY_FINISH, idleMs: 1_500 },
      (_: string, ctx) => gappy.run(ctx.signal),
    );
    const stalled = await drain(clock, stalls("hi"));
    expect(isStreamStalledError((stalled.error as Error).cause)).toBe(true);
    expect(stalled.ms).toBeGreaterThanOrEqual(2_000 + 1_500);
    expect(stalled.ms).toBeLessThan(2_000 + 1_500 + 500);
    expect(gappy.closed).toEqual([true]);
  });

  it("completion: `finish` needs a finish reason, `end` takes a stream that just ends", async () => {
    const { sh, clock } = setup();
    const cut = source(clock, [{ text: "a" }]);
    const byFinish = sh.stream("finish", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      cut.run(ctx.signal),
    );
    const failed = await drain(clock, byFinish("hi"));
    const truncated = (failed.error as Error).cause as Error & { type?: string };
    expect(isStreamTruncatedError(truncated)).toBe(true);
    expect(truncated.type).toBe("cut");
    const ends = source(clock, [{ text: "a" }]);
    const byEnd = sh.stream("end", { readOnly: true, format: BY_END }, (_: string, ctx) =>
      ends.run(ctx.signal),
    );
    expect((await drain(clock, byEnd("hi"))).error).toBeUndefined();
  });

  it("reports the output tokens the stream gave, on the span and the result; none when it gave none", async () => {
    const { sh, clock, otel } = setup();
    const counted = source(clock, [{ text: "a" }, { finish: "stop", tokens: 7 }]);
    const silent = source(clock, [{ text: "a" }, { finish: "stop" }]);
    const a = sh.stream("counted", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      counted.run(ctx.signal),
    );
    const b = sh.stream("silent", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      silent.run(ctx.signal),
    );
    const first = a("hi");
    await drain(clock, first);
    expect((await first.result).outputTokens).toBe(7);
    const second = b("hi");
    await drain(clock, second);
    expect((await second.result).outputTokens).toBeUndefined();
    const tokens = otel
      .named("agent.tool_call")
      .map((s) => s.attributes["gen_ai.usage.output_tokens"]);
    expect(tokens).toEqual([7, undefined]);
  });

  it("reports the input tokens and the answering model a format reads, the model from the first chunk naming one", async () => {
    const { sh, clock, otel } = setup();
    const named: StreamFormat<Part> = {
      read: (p) => ("finish" in p ? { finishReason: p.finish, inputTokens: 5 } : read(p)),
      completion: "finish",
      responseModel: (p) => ("text" in p ? (p.text === "" ? "" : `model-${p.text}`) : undefined),
    };
    const parts = source(clock, [{ text: "" }, { text: "a" }, { text: "b" }, { finish: "stop" }]);
    const chat = sh.stream("named", { readOnly: true, format: named }, (_: string, ctx) =>
      parts.run(ctx.signal),
    );
    await drain(clock, chat("hi"));
    const [span] = otel.named("agent.tool_call");
    expect(span?.attributes["gen_ai.usage.input_tokens"]).toBe(5);
    expect(span?.attributes["gen_ai.response.model"]).toBe("model-a");
    expect(() =>
      sh.stream(
        "bad",
        { readOnly: true, format: { ...named, responseModel: "x" as never } },
        (_: string, ctx) => parts.run(ctx.signal),
      ),
    ).toThrow(/format\.responseModel/);
  });

  it("input tokens: the last count a chunk read, once, on a failed attempt too", async () => {
    const { sh, clock, otel } = setup();
    // A provider that repeats its running usage on every chunk (Gemini) counts once.
    const running: StreamFormat<Part> = {
      read: (p) => ({ ...read(p), inputTokens: 9 }),
      completion: "finish",
    };
    const whole = source(clock, [{ text: "a" }, { text: "b" }, { finish: "stop" }]);
    const cut = source(clock, [{ text: "a" }, { text: "b" }]);
    const a = sh.stream("whole", { readOnly: true, format: running }, (_: string, ctx) =>
      whole.run(ctx.signal),
    );
    const b = sh.stream("cut", { readOnly: true, format: running }, (_: string, ctx) =>
      cut.run(ctx.signal),
    );
    await drain(clock, a("hi"));
    expect(isStreamInterruptedError((await drain(clock, b("hi"))).error)).toBe(true);
    const input = otel
      .named("agent.tool_call")
      .map((span) => span.attributes["gen_ai.usage.input_tokens"]);
    expect(input).toEqual([9, 9]);
  });

  it('"finish-and-end": complete at the end event after the finish reason; without it, cut', async () => {
    const { sh, clock } = setup();
    type Evt = Part | { end: true };
    const ended: StreamFormat<Evt> = {
      read: (p) => ("end" in p ? { end: true } : read(p)),
      completion: "finish-and-end",
    };
    const run = (name: string, parts: Evt[]) => {
      const parted = source(clock, parts as Part[]);
      const stream = sh.stream(name, { readOnly: true, format: ended }, (_: string, ctx) =>
        parted.run(ctx.signal),
      );
      return drain(clock, stream("hi") as AsyncIterable<Part>);
    };
    expect((await run("ends", [{ text: "a" }, { finish: "stop" }, { end: true }])).error).toBe(
      undefined,
    );
    // Cut between the finish reason and the end event; an end event before the finish counts not.
    for (const [name, parts] of [
      ["no-end", [{ text: "a" }, { finish: "stop" }]],
      ["end-first", [{ text: "a" }, { end: true }, { finish: "stop" }]],
    ] as const) {
      const { error } = await run(name, [...parts]);
      expect(isStreamInterruptedError(error), name).toBe(true);
      expect((error as Error).cause, name).toMatchObject({ type: "cut" });
    }
  });

  it("the caller's abort ends the attempt and closes the source; an aborted signal fails at once", async () => {
    const { sh, clock } = setup();
    const hanging = source(clock, [{ text: "a" }, "hang"]);
    const chat = sh.stream("chat", { readOnly: true, format: BY_FINISH }, (_: string, ctx) =>
      hanging.run(ctx.signal),
    );
    const caller = new AbortController();
    const reading = drain(clock, chat("hi", { signal: caller.signal }));
    await clock.advance(100);
    caller.abort(new Error("user left"));
    const { error, ms } = await reading;
    expect(error).toBeDefined();
    expect(ms).toBeLessThan(15_000);
    expect(hanging.closed).toEqual([true]);
    let opened = 0;
    const never = sh.stream("never", { readOnly: true, format: BY_FINISH }, (_: string, ctx) => {
      opened++;
      return source(clock, [{ text: "a" }]).run(ctx.signal);
    });
    const gone = await drain(clock, never("hi", { signal: AbortSignal.abort(new Error("gone")) }));
    expect(gone.error).toBeDefined();
    expect(opened).toBe(0);
  });

  it("a stream function must return an async iterable: the error says what it got", async () => {
    const { sh, clock } = setup();
    for (const [i, [given, got]] of [
      [null, "got null"],
      [undefined, "got undefined"],
      [42, "got number"],
      [{ next: () => undefined }, "got object"],
    ].entries()) {
      const s = sh.stream(`s-${i}`, { readOnly: true, format: BY_FINISH }, () => given as never);
      const { error } = await drain(clock, s("hi"));
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toContain(got);
    }
  });
});
