import { describe, expect, it } from "vitest";
import { BASELINES } from "../../bench/baselines.js";
import { runScenario, type SimResult } from "../../src/sim/run.js";
import { SCENARIOS, type Fault, type Scenario } from "../../src/sim/scenarios.js";
import { createWorld, type CallRecord, type StreamChunk } from "../../src/sim/world.js";

import { MIN, openai, testScenario } from "./test-world.js";

/** Ten token events, 50 ms apart: a whole answer is "t0 t1 ... t9 ". */
const TOKENS = 10;
const WHOLE = Array.from({ length: TOKENS }, (_, i) => `t${i} `).join("");

/** A streaming world (`stream: null`: one that does not stream) whose only fault is `fault` on the LLM. */
function streamingWorld(
  fault?: Fault,
  stream: Scenario["stream"] | null = { tokens: TOKENS, tokenMs: 50 },
) {
  const scenario = testScenario(fault, "openai", Infinity, stream ? { stream } : {});
  const record = createWorld(scenario, () => undefined);
  const { world } = record;
  let n = 0;
  const begin = () => {
    const id = `q${n++}`;
    record.calls.set(id, { id, op: "complete", startMs: world.elapsed(), attempts: [] });
    return id;
  };
  /** Reads one streamed request to its end, noting when each event came; settles the clock. */
  const read = async (options: { giveUpMs?: number } = {}) => {
    const call = begin();
    const controller = new AbortController();
    const cancel =
      options.giveUpMs === undefined
        ? undefined
        : world.clock.setTimer(options.giveUpMs, () => {
            controller.abort(new Error("gave up"));
          });
    const events: { atMs: number; chunk: StreamChunk }[] = [];
    const t0 = world.elapsed();
    const reading = (async () => {
      for await (const chunk of world.stream({ dep: openai, call, signal: controller.signal }))
        events.push({ atMs: world.elapsed() - t0, chunk });
    })().then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    await world.clock.advance(120_000);
    cancel?.();
    const error = await reading;
    const text = events.map((e) => ("text" in e.chunk ? e.chunk.text : "")).join("");
    const finished = events.some((e) => "finish" in e.chunk);
    return { call, events, error, text, finished, attempt: record.calls.get(call)?.attempts[0] };
  };
  /** What a plain reader (every baseline) makes of one request: the text it got, or its error. */
  const plain = async () => {
    const call = begin();
    const out = world.behave({ dep: openai, call, signal: undefined }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error: error as Error }),
    );
    await world.clock.advance(120_000);
    return { call, out: await out, attempt: record.calls.get(call)?.attempts[0] };
  };
  return { ...record, read, plain };
}

describe("the simulated world: streamed answers on virtual time", () => {
  it("a healthy stream: the first token after the provider's latency, one every tokenMs, then the finish event", async () => {
    const w = streamingWorld();
    const r = await w.read();
    expect(r.error).toBeUndefined();
    expect(r.text).toBe(WHOLE);
    expect(r.events.map((e) => e.atMs)).toEqual([
      ...Array.from({ length: TOKENS }, (_, i) => 800 + i * 50),
      800 + (TOKENS - 1) * 50,
    ]);
    expect(r.events.at(-1)?.chunk).toEqual({ finish: "stop", tokens: TOKENS });
    expect(r.attempt).toMatchObject({ result: "ok", atMs: 0, endMs: 1_250 });
    expect(w.world.whole(r.call, r.text)).toBe(true);
    // The plain reader gets the same whole answer.
    expect((await w.plain()).out).toEqual({ value: WHOLE });
  });

  it("slow_first_token: the first token comes delayMs late; a reader that gives up first records a timeout", async () => {
    const w = streamingWorld({ kind: "slow_first_token", rate: 1, delayMs: 30_000 });
    const patient = await w.read();
    expect(patient.events[0]?.atMs).toBe(30_800);
    expect(patient.text).toBe(WHOLE);
    expect(patient.attempt?.result).toBe("ok");
    const hasty = await w.read({ giveUpMs: 10_000 });
    expect(hasty.error?.message).toBe("gave up");
    expect(hasty.events).toEqual([]);
    const sentAt = hasty.attempt?.atMs ?? expect.unreachable();
    expect(hasty.attempt).toMatchObject({ result: "timeout", endMs: sentAt + 10_000 });
  });

  it("stream_cut: after `share` of the tokens the read fails as undici's does, with no finish event", async () => {
    const w = streamingWorld({ kind: "stream_cut", rate: 1, share: 0.4 });
    const r = await w.read();
    expect(r.text).toBe("t0 t1 t2 t3 ");
    expect(r.finished).toBe(false);
    expect(r.error).toBeInstanceOf(TypeError);
    expect(r.error?.message).toBe("terminated");
    expect((r.error?.cause as { code?: string }).code).toBe("UND_ERR_SOCKET");
    expect(r.attempt?.result).toBe("cut");
    // A plain reader sees the error: not an answer.
    expect((await w.plain()).out).toMatchObject({ error: { message: "terminated" } });
  });

  it("stream_stall: silent for silentMs mid-answer, then the rest, whole", async () => {
    const w = streamingWorld({ kind: "stream_stall", rate: 1, share: 0.5, silentMs: 45_000 });
    const r = await w.read();
    expect(r.text).toBe(WHOLE);
    expect(r.finished).toBe(true);
    const gaps = r.events.slice(1).map((e, i) => e.atMs - (r.events[i]?.atMs ?? 0));
    expect(Math.max(...gaps)).toBe(45_050); // before token 5: the usual 50 ms, then the silence
    expect(r.events[5]?.chunk).toEqual({ text: "t5 " });
    expect(r.attempt?.result).toBe("ok");
    // A reader that gives up in the silence records a timeout.
    expect((await w.read({ giveUpMs: 10_000 })).attempt?.result).toBe("timeout");
  });

  it("no_finish: the stream ends quietly after `share` of the tokens; a plain reader takes the part for the answer", async () => {
    const w = streamingWorld({ kind: "no_finish", rate: 1, share: 0.7 });
    const r = await w.read();
    expect(r.error).toBeUndefined();
    expect(r.finished).toBe(false);
    expect(r.text).toBe("t0 t1 t2 t3 t4 t5 t6 ");
    expect(r.attempt?.result).toBe("no_finish");
    const { call, out, attempt } = await w.plain();
    expect(out).toEqual({ value: "t0 t1 t2 t3 t4 t5 t6 " });
    expect(attempt?.result).toBe("no_finish");
    // The world knows it was not the whole answer, whatever the reader believed.
    expect(w.world.whole(call, "t0 t1 t2 t3 t4 t5 t6 ")).toBe(false);
  });

  it("no_finish with share 1: every token came, only the finish did not; the text is whole", async () => {
    const w = streamingWorld({ kind: "no_finish", rate: 1, share: 1 });
    const r = await w.read();
    expect(r.finished).toBe(false);
    expect(r.text).toBe(WHOLE);
    expect(w.world.whole(r.call, r.text)).toBe(true);
  });

  it("rate: only that share of requests is bent, and the draws are seeded", async () => {
    const results = async () => {
      const w = streamingWorld({ kind: "no_finish", rate: 0.3, share: 0.5 });
      const out: string[] = [];
      for (let i = 0; i < 100; i++) out.push((await w.read()).attempt?.result ?? "");
      return out;
    };
    const first = await results();
    const bent = first.filter((r) => r === "no_finish").length;
    expect(bent).toBeGreaterThan(15);
    expect(bent).toBeLessThan(45);
    expect(await results()).toEqual(first);
  });

  it("a request that does not stream is answered whole under a stream fault", async () => {
    const w = streamingWorld({ kind: "stream_cut", rate: 1, share: 0.5 }, null);
    const { out, attempt } = await w.plain();
    expect(out).toEqual({ value: "answer to q0" });
    expect(attempt?.result).toBe("ok");
  });
});

const streams = SCENARIOS.streams ?? expect.unreachable();

describe("the streams scenario: selfheal's sh.stream against plain streaming readers", () => {
  /**
   * One run of the scenario under `policy`, made by each test itself: a run shared between tests
   * would be credited by Stryker's per-test coverage to the first test only.
   */
  const run = async (policy: string): Promise<{ result: SimResult; calls: CallRecord[] }> => {
    const calls: CallRecord[] = [];
    const create = BASELINES[policy];
    const result = await runScenario(streams, {
      ...(create && { policy: { name: policy, create } }),
      onCall: (c) => calls.push(c),
    });
    return { result, calls };
  };

  it("selfheal delivers every answer whole: no user-visible failure, no truncated answer, no page", async () => {
    const { result, calls } = await run("selfheal");
    expect(result.incidents).toBeGreaterThan(60);
    expect(result.autoRecoveryRate).toBe(1);
    expect(result.userVisibleFailures).toBe(0);
    expect(result.truncatedAnswers).toBe(0);
    expect(result.pages).toBe(0);
    expect(result.wastedRetries).toBe(0);
    // The secondary carried the bent streams.
    expect(result.callsPerProvider.anthropic).toBeGreaterThan(60);
    // Every answer the fleet got was the whole one (restart markers were honoured).
    const answers = calls.filter((c) => c.op === "complete");
    expect(answers).toHaveLength(result.tasks);
    expect(answers.every((c) => c.ok)).toBe(true);
  });

  it("selfheal diagnoses every stream fault by its STREAM_* pattern", async () => {
    const { result } = await run("selfheal");
    expect(result.diagnoses.STREAM_FIRST_TOKEN_TIMEOUT).toBeGreaterThan(10);
    expect(result.diagnoses.STREAM_STALLED).toBeGreaterThan(10);
    expect(result.diagnoses.STREAM_TRUNCATED).toBeGreaterThan(20);
  });

  it("selfheal bounds each bent stream by its limits: 10 s to the first token, 5 s of silence", async () => {
    const { calls } = await run("selfheal");
    const failedFirst = calls
      .flatMap((c) => c.attempts.slice(0, 1))
      .filter((a) => a.result !== "ok");
    expect(failedFirst.length).toBeGreaterThan(60);
    // A slow first token is given up at 10 s; a stall 5 s after the last token before it.
    for (const a of failedFirst) expect(a.endMs - a.atMs).toBeLessThanOrEqual(10_000);
    const stalled = failedFirst.filter((a) => a.atMs >= 15 * MIN && a.atMs < 25 * MIN);
    expect(stalled.length).toBeGreaterThan(10);
    const { tokens, tokenMs } = streams.stream ?? expect.unreachable();
    const lastToken = 800 + (tokens / 2 - 1) * tokenMs; // the stall strikes half-way
    for (const a of stalled) expect(a.endMs - a.atMs).toBe(lastToken + 5_000);
  });

  it.each(Object.keys(BASELINES))(
    "%s reads streams plainly: answers cut short reach users as if whole, and count as failures",
    async (policy) => {
      const { result, calls } = await run(policy);
      expect(result.truncatedAnswers).toBeGreaterThan(20);
      expect(result.userVisibleFailures).toBeGreaterThanOrEqual(result.truncatedAnswers);
      expect(result.diagnoses).toEqual({});
      // Each truncated answer came from a stream that ended without its finish event.
      const truncated = calls.filter(
        (c) => c.op === "complete" && !c.ok && c.attempts.at(-1)?.result === "no_finish",
      );
      expect(truncated).toHaveLength(result.truncatedAnswers);
    },
  );

  it("is deterministic on virtual time: the same figures on every run", async () => {
    const { result } = await run("selfheal");
    expect(await runScenario(streams)).toEqual(result);
  });
});
