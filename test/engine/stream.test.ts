import { describe, expect, it } from "vitest";
import {
  isStreamInterruptedError,
  isStreamRestart,
  isStreamStalledError,
  isStreamTruncatedError,
  isToolTimeoutError,
  StreamRestart,
  type ChunkInfo,
  type HealedStream,
  type StreamFormat,
  type ToolCallEvent,
} from "../../src/index.js";
import type { VirtualClock } from "../../src/testing/index.js";
import { configError, NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

/** A chunk of the fake model: a token, or the end with its finish reason. */
type Chunk = { text: string } | { finish: string; tokens?: number };

const FORMAT: StreamFormat<Chunk> = {
  read: (c): ChunkInfo =>
    "text" in c
      ? { token: true, answer: c.text !== "" }
      : { finishReason: c.finish, outputTokens: c.tokens },
  completion: "finish",
};

/** What one route does: tokens at a pace, then a fault (or a clean finish). */
interface Script {
  /** Delay before the first token, ms. */
  firstMs?: number;
  tokens: number;
  /** Gap between tokens, ms. */
  gapMs?: number;
  /** After the tokens: finish (default "stop"), end without finish (cut), throw, or go silent. */
  then?: "stop" | "cut" | "throw" | "silent" | "length" | "content_filter";
}

/** A fake model streaming on virtual time; records how each route's streams ended. */
function fakeModel(clock: VirtualClock, scripts: Record<string, Script[]>) {
  const log: string[] = [];
  const calls: Record<string, number> = {};
  async function* stream(route: string, signal: AbortSignal): AsyncGenerator<Chunk> {
    const n = (calls[route] = (calls[route] ?? 0) + 1);
    const script = scripts[route]?.[n - 1] ?? scripts[route]?.at(-1) ?? { tokens: 3 };
    try {
      await clock.sleep(script.firstMs ?? 10, signal);
      for (let i = 0; i < script.tokens; i++) {
        if (i > 0) await clock.sleep(script.gapMs ?? 10, signal);
        yield { text: `${route}${i} ` };
      }
      switch (script.then ?? "stop") {
        case "cut":
          return;
        case "throw":
          throw Object.assign(new Error("terminated"), { code: "UND_ERR_SOCKET" });
        case "silent":
          await clock.sleep(3_600_000, signal);
          return;
        default:
          yield { finish: script.then ?? "stop", tokens: script.tokens };
      }
    } finally {
      log.push(`${route}#${n} closed`);
    }
  }
  return { stream, log, calls };
}

async function drain<T>(clock: VirtualClock, s: HealedStream<T>) {
  const items: T[] = [];
  const reading = (async () => {
    for await (const item of s) items.push(item);
  })();
  let error: unknown;
  await clock.run(
    reading.catch((e: unknown) => (error = e)),
    { stepMs: 50 },
  );
  return { items, error };
}

const text = (items: unknown[]) =>
  items
    .map((i) =>
      isStreamRestart(i) ? "|restart|" : "text" in (i as Chunk) ? (i as { text: string }).text : "",
    )
    .join("");

function setup(routes: string[], options: { meters?: boolean } = {}) {
  const traces = recordingProvider();
  const meters = options.meters ? recordingMeters() : undefined;
  const vi = recoveryInstance(
    traces.provider,
    { providers: routes.map((name) => ({ name })) },
    meters ? { meterProvider: meters.meterProvider } : {},
  );
  const calls: ToolCallEvent[] = [];
  vi.sh.on("tool-call", (e) => calls.push(e));
  return { ...vi, traces, meters, calls };
}

describe("sh.stream: limits and completion", () => {
  it("passes a complete stream through and describes it on the call span", async () => {
    const { sh, clock, traces } = setup(["a"]);
    const model = fakeModel(clock, { a: [{ tokens: 4, firstMs: 120 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    const s = answer("hi");
    const { items, error } = await drain(clock, s);
    expect(error).toBeUndefined();
    expect(text(items)).toBe("a0 a1 a2 a3 ");
    const result = await s.result;
    expect(result).toMatchObject({
      outcome: "success",
      attempts: 1,
      chunks: 5,
      restarts: 0,
      firstTokenMs: 120,
      finishReason: "stop",
      outputTokens: 4,
    });
    const [span] = traces.named("agent.tool_call");
    expect(span?.attributes).toMatchObject({
      "selfheal.stream.mode": "fail",
      "selfheal.stream.first_token_ms": 120,
      "selfheal.stream.chunks": 5,
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.usage.output_tokens": 4,
      "selfheal.call.outcome": "success",
    });
  });

  it("a cut stream in fail mode is a failure everywhere: the reader, status, metrics, events", async () => {
    const { sh, clock, meters, calls } = setup(["a"], { meters: true });
    const model = fakeModel(clock, { a: [{ tokens: 3, then: "cut" }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    for (let i = 0; i < 10; i++) {
      const { items, error } = await drain(clock, answer("hi"));
      expect(text(items)).toBe("a0 a1 a2 ");
      expect(isStreamInterruptedError(error)).toBe(true);
      const interrupted = error as { delivered: number; cause: unknown };
      expect(interrupted.delivered).toBe(3);
      expect(isStreamTruncatedError(interrupted.cause)).toBe(true);
    }
    // Nothing resent after the first token: one request per call.
    expect(model.calls.a).toBe(10);
    expect(calls.map((c) => c.outcome)).toEqual(Array(10).fill("error"));
    await clock.advance(6_000); // past the 5 s health cache
    expect((await sh.status()).status).toBe("critical");
    if (!meters) throw new Error("no meters");
    const points = await meters.read();
    expect(
      points.get("selfheal_stream_failures{agent=test-agent,tool=chat,pattern=STREAM_TRUNCATED}"),
    ).toBe(10);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=chat,outcome=error}")).toBe(10);
    expect(
      points.get("selfheal_stream_time_to_first_token_seconds{agent=test-agent,tool=chat}"),
    ).toBe(10);
  });

  it("restart: the reader gets the discard marker, then the whole answer from the next route", async () => {
    const { sh, clock, events } = setup(["a", "b"]);
    const model = fakeModel(clock, { a: [{ tokens: 3, then: "throw" }], b: [{ tokens: 4 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, providers: ["a", "b"], format: FORMAT, afterFirstToken: "restart" },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    const s = answer("hi");
    const { items, error } = await drain(clock, s);
    expect(error).toBeUndefined();
    expect(text(items)).toBe("a0 a1 a2 |restart|b0 b1 b2 b3 ");
    const marker = items.find(isStreamRestart) as StreamRestart;
    expect(marker).toMatchObject({ discard: 3, attempt: 2, provider: "b" });
    expect(isStreamTruncatedError(marker.cause)).toBe(true);
    expect(await s.result).toMatchObject({ outcome: "recovered", provider: "b", restarts: 1 });
    expect(events[0]).toMatchObject({ pattern: "STREAM_TRUNCATED", outcome: "recovered" });
  });

  it("buffer: nothing reaches the reader until a stream completes; no restart marker", async () => {
    const { sh, clock } = setup(["a", "b"]);
    const model = fakeModel(clock, { a: [{ tokens: 3, then: "cut" }], b: [{ tokens: 2 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, providers: ["a", "b"], format: FORMAT, afterFirstToken: "buffer" },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    const { items, error } = await drain(clock, answer("hi"));
    expect(error).toBeUndefined();
    expect(text(items)).toBe("b0 b1 ");
  });

  it("a slow first token fails over before anything reached the reader (fail mode)", async () => {
    const { sh, clock, events } = setup(["a", "b"]);
    const model = fakeModel(clock, { a: [{ tokens: 3, firstMs: 60_000 }], b: [{ tokens: 2 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, providers: ["a", "b"], format: FORMAT, firstTokenMs: 5_000 },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    const started = clock.now();
    const s = answer("hi");
    const { items, error } = await drain(clock, s);
    expect(error).toBeUndefined();
    expect(text(items)).toBe("b0 b1 ");
    expect(clock.now() - started).toBeLessThan(5_200);
    expect(events[0]).toMatchObject({
      pattern: "STREAM_FIRST_TOKEN_TIMEOUT",
      outcome: "recovered",
    });
    // The slow request was aborted, not left running.
    expect(model.log).toContain("a#1 closed");
  });

  it("a stall after the first token is caught by idleMs and restarted on the next route", async () => {
    const { sh, clock } = setup(["a", "b"]);
    const model = fakeModel(clock, { a: [{ tokens: 2, then: "silent" }], b: [{ tokens: 2 }] });
    const answer = sh.stream(
      "chat",
      {
        readOnly: true,
        providers: ["a", "b"],
        format: FORMAT,
        idleMs: 2_000,
        afterFirstToken: "restart",
      },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    const started = clock.now();
    const { items } = await drain(clock, answer("hi"));
    expect(text(items)).toBe("a0 a1 |restart|b0 b1 ");
    const marker = items.find(isStreamRestart) as StreamRestart;
    expect(isStreamStalledError(marker.cause)).toBe(true);
    expect(clock.now() - started).toBeLessThan(2_200);
    expect(model.log).toContain("a#1 closed");
  });

  it("a stalled stream ends within the call's deadline, whatever idleMs says", async () => {
    const { sh, clock } = setup(["a"]);
    const model = fakeModel(clock, { a: [{ tokens: 2, then: "silent" }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT, idleMs: 600_000, deadlineMs: 30_000 },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    const started = clock.now();
    const { error } = await drain(clock, answer("hi"));
    expect(clock.now() - started).toBeLessThanOrEqual(30_050);
    expect(isStreamInterruptedError(error)).toBe(true);
    expect(isToolTimeoutError((error as Error).cause)).toBe(true);
    expect(model.log).toContain("a#1 closed");
  });

  it("finish reasons: length is truncated, content_filter is a content policy failure", async () => {
    const { sh, clock, events } = setup(["a"]);
    const model = fakeModel(clock, {
      a: [
        { tokens: 1, then: "length" },
        { tokens: 1, then: "content_filter" },
      ],
    });
    const answer = sh.stream(
      "chat",
      {
        readOnly: true,
        provider: "a",
        format: FORMAT,
        afterFirstToken: "buffer",
        plans: { STREAM_TRUNCATED: [] },
      },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    const first = await drain(clock, answer("hi"));
    expect(isStreamTruncatedError(first.error)).toBe(true);
    expect((first.error as { type: string }).type).toBe("length");
    const second = await drain(clock, answer("hi"));
    expect((second.error as { type: string }).type).toBe("content_filter");
    expect(events.map((e) => e.pattern)).toEqual(["STREAM_TRUNCATED", "CONTENT_POLICY"]);
  });

  it("an empty stream is an empty answer, retried; an error before the first token is any call's", async () => {
    const { sh, clock, events } = setup(["a", "b"]);
    const model = fakeModel(clock, { a: [{ tokens: 0 }], b: [{ tokens: 1 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, providers: ["a", "b"], format: FORMAT },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    const { items } = await drain(clock, answer("hi"));
    expect(text(items)).toBe("b0 ");
    expect(events[0]?.pattern).toBe("EMPTY_LLM_RESPONSE");
  });

  it("a reader that stops early cancels the stream: the source is closed, the route not blamed", async () => {
    const { sh, clock, calls } = setup(["a"]);
    const model = fakeModel(clock, { a: [{ tokens: 50, gapMs: 100 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    const s = answer("hi");
    const reading = (async () => {
      const seen: Chunk[] = [];
      for await (const chunk of s) if (seen.push(chunk) === 3) break;
    })();
    await clock.run(reading, { stepMs: 50 });
    await clock.advance(100);
    expect(model.log).toEqual(["a#1 closed"]);
    await expect(s.result).rejects.toMatchObject({ name: "AbortError" });
    expect(calls[0]?.outcome).toBe("error");
  });

  it("a stream function that returns no iterable fails with a TypeError naming the stream", async () => {
    const { sh, clock } = setup(["a"]);
    const answer = sh.stream("chat", { readOnly: true, provider: "a" }, () => 42 as never);
    const { error } = await drain(clock, answer("hi"));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain('stream "chat" must return an async iterable');
  });

  it("refuses bad options by name", () => {
    const { sh } = setup(["a"]);
    const fn = () => (async function* () {})();
    expect(() => sh.stream("x", { readOnly: true, firstTokenMs: 0 }, fn)).toThrow(/firstTokenMs/);
    expect(() =>
      sh.stream("y", { readOnly: true, afterFirstToken: "resume" as never }, fn),
    ).toThrow(/afterFirstToken/);
    expect(() => sh.stream("z", { readOnly: true, isEmpty: () => true } as never, fn)).toThrow(
      /isEmpty/,
    );
    expect(() => sh.stream("w", { readOnly: true, format: { read: 1 } as never }, fn)).toThrow(
      /format/,
    );
    expect(() => sh.stream("v", { readOnly: true, bogus: 1 } as never, fn)).toThrow(/bogus/);
  });

  it("names the bad stream option exactly: the format, its completion, failOnFinish", () => {
    const { sh } = setup(["a"]);
    const fn = () => (async function* () {})();
    const refusal = (options: object) =>
      configError(() => sh.stream("s", { readOnly: true, ...options }, fn));
    expect(refusal({ format: { completion: "end" } }).message).toBe(
      'selfheal: invalid option `stream("s").options.format`: missing method read()',
    );
    const completion = refusal({ format: { read: () => ({}) } });
    expect(completion.field).toBe('stream("s").options.format.completion');
    expect(completion.message).toContain(
      'expected "finish" (a finish reason completes the stream), "finish-and-end" (a finish reason, then the end event) or "end" (its end does)',
    );
    for (const failOnFinish of ["length", ["length", 3]]) {
      const e = refusal({ failOnFinish });
      expect(e.field).toBe('stream("s").options.failOnFinish');
      expect(e.message).toMatch(/expected a list of finish reasons$/);
    }
    expect(() =>
      sh.stream("ok", { readOnly: true, failOnFinish: ["length"], format: FORMAT }, fn),
    ).not.toThrow();
  });

  it("a half-open probe of a stream may outlast probeTimeoutMs: its first-token limit bounds it", async () => {
    const { sh, clock, circuits } = setup(["a", "b"]);
    // a cuts its streams until its breaker opens, then answers slowly: 15 tokens, 1 s apart.
    const scripts: Record<string, Script[]> = {
      a: [{ tokens: 2, then: "cut" }],
      b: [{ tokens: 2 }],
    };
    const model = fakeModel(clock, scripts);
    const answer = sh.stream(
      "chat",
      { readOnly: true, providers: ["a", "b"], format: FORMAT, afterFirstToken: "buffer" },
      (_: string, ctx) => model.stream(ctx.provider ?? "?", ctx.signal),
    );
    for (let i = 0; i < 6 && !circuits.includes("a:open"); i++) await drain(clock, answer("hi"));
    expect(circuits).toEqual(["a:open"]);
    scripts.a = [
      ...Array<Script>(model.calls.a ?? 0).fill({ tokens: 2 }),
      { tokens: 15, gapMs: 1_000 },
    ];
    await clock.advance(6_000); // past the breaker's first open period: the next call probes a
    const s = answer("hi");
    const { items, error } = await drain(clock, s);
    expect(error).toBeUndefined();
    expect(items).toHaveLength(16);
    expect(await s.result).toMatchObject({ provider: "a", outcome: "success" });
    expect(circuits.at(-1)).toBe("a:closed");
  });
});

describe("sh.stream: the caller, the span and the key", () => {
  it("the caller's signal aborts the stream with its own reason, before or during it", async () => {
    const { sh, clock } = setup(["a"]);
    const model = fakeModel(clock, { a: [{ tokens: 50, gapMs: 100 }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    const before = new AbortController();
    before.abort(new Error("user left"));
    const early = await drain(clock, answer("hi", { signal: before.signal }));
    expect(early.items).toEqual([]);
    expect((early.error as Error).message).toBe("user left");

    const during = new AbortController();
    const s = answer("hi", { signal: during.signal });
    const reading = drain(clock, s);
    await clock.advance(250); // a few tokens in
    during.abort(new Error("user pressed stop"));
    const { items, error } = await reading;
    expect(items.length).toBeGreaterThan(0);
    // The caller gave up: its own reason, not "interrupted after n chunks".
    expect(isStreamInterruptedError(error)).toBe(false);
    expect((error as Error).message).toBe("user pressed stop");
    expect(model.log).toContain(`a#${String(model.calls.a)} closed`);
  });

  it("a stream's own failure says on the call span how far it got", async () => {
    const { sh, clock, traces } = setup(["a"]);
    const model = fakeModel(clock, { a: [{ tokens: 3, firstMs: 40, then: "cut" }] });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT },
      (_: string, ctx) => model.stream("a", ctx.signal),
    );
    await drain(clock, answer("hi"));
    const [span] = traces.named("agent.tool_call");
    expect(span?.attributes).toMatchObject({
      "selfheal.stream.chunks": 3,
      "selfheal.stream.first_token_ms": 40,
      "selfheal.call.outcome": "error",
    });
  });

  it("a stream that failed before its first token names no first-token time; other errors add nothing", async () => {
    const traces = recordingProvider();
    // No recovery: the call ends with the stream's own error.
    const { sh, clock } = recoveryInstance(traces.provider, {
      providers: [{ name: "a" }],
      plans: NO_RECOVERY.plans,
    });
    const answer = sh.stream(
      "chat",
      { readOnly: true, provider: "a", format: FORMAT, firstTokenMs: 100 },
      async function* (_: string, ctx) {
        await clock.sleep(1_000, ctx.signal);
        yield { text: "late" };
      },
    );
    await drain(clock, answer("hi"));
    const broken = sh.stream(
      "broken",
      { readOnly: true, provider: "a", format: FORMAT },
      async function* () {
        await clock.sleep(10);
        yield* [];
        throw Object.assign(new Error("bad request"), { status: 400 });
      },
    );
    await drain(clock, broken("hi"));
    const [slow, bad] = traces.named("agent.tool_call");
    expect(slow?.attributes["selfheal.stream.chunks"]).toBe(0);
    expect(Object.hasOwn(slow?.attributes ?? {}, "selfheal.stream.first_token_ms")).toBe(false);
    expect(Object.hasOwn(bad?.attributes ?? {}, "selfheal.stream.chunks")).toBe(false);
  });

  it("an answer without finish reason or token count leaves them off the span", async () => {
    const { sh, clock, traces } = setup(["a"]);
    const answer = sh.stream(
      "chat",
      {
        readOnly: true,
        provider: "a",
        format: { read: () => ({ token: true, answer: true }), completion: "end" },
      },
      async function* () {
        await clock.sleep(10);
        yield* [{ text: "a" }, { text: "b" }];
      },
    );
    const { error } = await drain(clock, answer("hi"));
    expect(error).toBeUndefined();
    const [span] = traces.named("agent.tool_call");
    for (const key of ["gen_ai.response.finish_reasons", "gen_ai.usage.output_tokens"])
      expect(Object.hasOwn(span?.attributes ?? {}, key), key).toBe(false);
    expect(span?.attributes["selfheal.stream.chunks"]).toBe(2);
  });

  it("a keyed write's key function gets the caller's arguments; the same key streams once", async () => {
    const { sh, clock } = setup(["a"]);
    const keyed: unknown[] = [];
    let sent = 0;
    const answer = sh.stream(
      "draft",
      {
        readOnly: false,
        provider: "a",
        format: FORMAT,
        idempotencyKey: (args: { id: string }) => {
          keyed.push(args);
          return args.id;
        },
      },
      async function* () {
        sent++;
        await clock.sleep(10);
        yield* [{ text: "x" }, { finish: "stop" }];
      },
    );
    const first = await drain(clock, answer({ id: "d1" }));
    const again = await drain(clock, answer({ id: "d1" }));
    expect(first.error).toBeUndefined();
    expect(again.error).toBeUndefined();
    expect(keyed).toEqual([{ id: "d1" }, { id: "d1" }]);
    expect(sent).toBe(1);
  });
});
