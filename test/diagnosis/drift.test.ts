import { describe, expect, it } from "vitest";
import { DEFAULT_DRIFT, DriftDetector } from "../../src/diagnosis/drift.js";
import type { Advice, AdviceOutcome, DriftEvent } from "../../src/index.js";
import { virtualInstance } from "../helpers/engine.js";

/** A provider whose rate-limit errors carry no status: only the wording tells what they are. */
function wordyProvider(options: Parameters<typeof virtualInstance>[0] = {}) {
  const { sh } = virtualInstance(options);
  const drift: (DriftEvent & { agent: string })[] = [];
  sh.on("diagnoser-drift", (e) => drift.push(e));
  let wording = "Quota exceeded for quota metric 'requests per minute'";
  const search = sh.tool("search", { readOnly: true }, () => {
    throw new Error(wording);
  });
  const call = async (n: number) => {
    for (let i = 0; i < n; i++) await search(undefined).catch(() => undefined);
  };
  return {
    sh,
    drift,
    call,
    switchWording: (w: string) => {
      wording = w;
    },
  };
}

describe("wording drift", () => {
  it("fires once when the UNKNOWN share crosses 5%, with the unknown texts kept (redacted)", async () => {
    const p = wordyProvider();
    await p.call(30);
    expect(p.drift).toHaveLength(0);
    expect(p.sh.unknownSamples()).toEqual([]);

    p.switchWording("Slow down! Request budget for key owner ops@example.com spent");
    await p.call(70);

    const overall = p.drift.filter((e) => e.tool === undefined);
    const perTool = p.drift.filter((e) => e.tool === "search");
    expect(overall).toHaveLength(1);
    expect(perTool).toHaveLength(1);
    // 1 unknown in 31 is 3.2%; 2 in 32 is 6.25%: the second unknown crosses.
    expect(overall[0]).toMatchObject({
      agent: "test-agent",
      samples: 32,
      share: 2 / 32,
      threshold: 0.05,
    });
    expect(overall[0]?.unknown.map((s) => s.text)).toEqual([
      "Slow down! Request budget for key owner [REDACTED_EMAIL] spent",
      "Slow down! Request budget for key owner [REDACTED_EMAIL] spent",
    ]);
    // The review keeps the latest 20.
    const kept = p.sh.unknownSamples("search");
    expect(kept).toHaveLength(20);
    expect(kept.every((s) => s.tool === "search" && !s.text.includes("@"))).toBe(true);
  });

  it("says nothing before the minimum sample count, then fires at it", async () => {
    const p = wordyProvider();
    await p.call(5);
    p.switchWording("Slow down!");
    await p.call(14);
    expect(p.drift).toHaveLength(0);
    await p.call(1);
    expect(p.drift.find((e) => e.tool === undefined)).toMatchObject({
      samples: 20,
      share: 15 / 20,
    });
    await p.call(50);
    expect(p.drift.filter((e) => e.tool === undefined)).toHaveLength(1);
  });

  it("re-arms once the share falls back, and the window and minimum are configurable", async () => {
    const p = wordyProvider({
      diagnosis: { drift: { window: 10, minSamples: 10, threshold: 0.2 } },
    });
    p.switchWording("Slow down!");
    await p.call(10);
    expect(p.drift.filter((e) => e.tool === undefined)).toHaveLength(1);
    p.switchWording("rate limit reached");
    await p.call(10);
    p.switchWording("Slow down!");
    await p.call(3);
    expect(p.drift.filter((e) => e.tool === undefined)).toHaveLength(2);
  });
});

describe("escalateUnknown (advisory, off the call path)", () => {
  it("is asked about UNKNOWN errors only; the call does not wait; the advice is recorded, not used", async () => {
    const asked: string[] = [];
    const { sh, clock } = virtualInstance({
      diagnosis: {
        escalateUnknown: async (_error, { text }) => {
          asked.push(text);
          await clock.sleep(1_000);
          return {
            pattern: "RATE_LIMIT",
            confidence: 2,
            note: "throttling; see key sk-proj-abcdefghijklmnopqrstu",
          };
        },
      },
    });
    const advice: unknown[] = [];
    sh.on("diagnosis-advice", (a) => advice.push(a));
    const diagnoses: string[] = [];
    sh.on("diagnosis", (d) => diagnoses.push(d.pattern));
    const t = sh.tool("t", { readOnly: true }, (msg: string) => {
      throw new Error(msg);
    });
    await t("the flux capacitor is misaligned").catch(() => undefined);
    await t("503 Service Unavailable").catch(() => undefined);
    expect(diagnoses).toEqual(["UNKNOWN", "SERVICE_DOWN"]);
    expect(asked).toEqual(["the flux capacitor is misaligned"]);
    expect(advice).toHaveLength(0); // the call returned before the advisor answered
    await clock.advance(1_000);
    expect(advice).toEqual([
      {
        agent: "test-agent",
        tool: "t",
        at: expect.any(Number) as number,
        advice: {
          pattern: "RATE_LIMIT",
          confidence: 1,
          note: "throttling; see key [REDACTED_KEY]",
        },
      },
    ]);
    expect(sh.unknownSamples("t")[0]?.advice?.advice?.pattern).toBe("RATE_LIMIT");
  });

  it("is time-boxed: a hung advisor is aborted and reported", async () => {
    let signal: AbortSignal | undefined;
    const { sh, clock } = virtualInstance({
      diagnosis: {
        escalateTimeoutMs: 2_000,
        escalateUnknown: (_e, ctx) => {
          signal = ctx.signal;
          return new Promise(() => undefined);
        },
      },
    });
    const advice: { failure?: string }[] = [];
    sh.on("diagnosis-advice", (a) => advice.push(a));
    await sh
      .tool("t", { readOnly: true }, () => Promise.reject(new Error("???")))(undefined)
      .catch(() => undefined);
    await clock.advance(2_000);
    expect(signal?.aborted).toBe(true);
    expect(advice[0]?.failure).toMatch(/did not answer within 2000 ms/);
  });

  it("an answer naming no known pattern is not kept", async () => {
    const { sh, clock } = virtualInstance({
      diagnosis: { escalateUnknown: () => ({ pattern: "GREMLINS" as never }) },
    });
    const advice: { failure?: string; advice?: unknown }[] = [];
    sh.on("diagnosis-advice", (a) => advice.push(a));
    await sh
      .tool("t", { readOnly: true }, () => Promise.reject(new Error("???")))(undefined)
      .catch(() => undefined);
    await clock.advance(1);
    expect(advice[0]).toMatchObject({ failure: 'answered an unknown pattern "GREMLINS"' });
    expect(advice[0]?.advice).toBeUndefined();
  });
});

describe("drift at the threshold", () => {
  const tight = { diagnosis: { drift: { window: 10, minSamples: 10, threshold: 0.5 } } };
  const overall = (p: ReturnType<typeof wordyProvider>) =>
    p.drift.filter((e) => e.tool === undefined);

  it("a share equal to the threshold is no drift; just above it is", async () => {
    const p = wordyProvider(tight);
    p.switchWording("rate limit reached");
    await p.call(5);
    p.switchWording("Slow down!");
    await p.call(5);
    expect(overall(p)).toHaveLength(0); // 5 of 10
    await p.call(1);
    expect(overall(p)).toMatchObject([{ share: 0.6, samples: 10 }]);
  });

  it("falling back to exactly the threshold re-arms", async () => {
    const p = wordyProvider(tight);
    p.switchWording("Slow down!");
    await p.call(6);
    p.switchWording("rate limit reached");
    await p.call(4);
    expect(overall(p)).toHaveLength(1); // 6 of 10
    await p.call(1); // 5 of 10: re-armed
    p.switchWording("Slow down!");
    await p.call(5); // the unknowns that leave the window are replaced: still 5 of 10
    expect(overall(p)).toHaveLength(1);
    await p.call(1); // 6 of 10
    expect(overall(p)).toHaveLength(2);
  });
});

describe("DriftDetector for a tool it has not seen", () => {
  it("has no samples, no share, and files advice nowhere", () => {
    const events: DriftEvent[] = [];
    const detector = new DriftDetector(DEFAULT_DRIFT, (e) => events.push(e));
    expect(detector.samples("never")).toEqual([]);
    expect(detector.share("never")).toBeUndefined();
    expect(detector.share()).toBeUndefined();
    detector.attachAdvice("never", 0, { tool: "never", failure: "no advice" });
    detector.record("seen", "UNKNOWN", "???", 5);
    detector.attachAdvice("seen", 6, { tool: "seen", failure: "no advice" });
    expect(detector.samples("seen")).toEqual([{ at: 5, tool: "seen", text: "???" }]);
    expect(detector.samples("never")).toEqual([]);
    expect(events).toEqual([]);
  });

  it("through the instance: no samples for an unknown tool", () => {
    expect(virtualInstance().sh.unknownSamples("never")).toEqual([]);
  });
});

describe("escalateUnknown answers", () => {
  /** An instance whose advisor answers `answer(text)` after `delayMs` of virtual time. */
  function advised(
    answer: (text: string) => Advice | undefined,
    { delayMs = 0, keepSamples = 20 } = {},
  ) {
    const { sh, clock } = virtualInstance({
      diagnosis: {
        drift: { keepSamples },
        escalateUnknown: async (_e, { text }) => {
          if (delayMs) await clock.sleep(delayMs);
          return answer(text);
        },
      },
    });
    const advice: (AdviceOutcome & { agent: string; at: number })[] = [];
    sh.on("diagnosis-advice", (a) => advice.push(a));
    const t = sh.tool("t", { readOnly: true }, (msg: string) => {
      throw new Error(msg);
    });
    const fail = (msg: string) => t(msg).catch(() => undefined);
    return { sh, clock, advice, fail };
  }

  it("no answer is reported as such", async () => {
    const a = advised(() => undefined);
    await a.fail("???");
    await a.clock.advance(1);
    expect(a.advice).toEqual([
      { agent: "test-agent", tool: "t", at: expect.any(Number) as number, failure: "no advice" },
    ]);
  });

  it("an answer with a pattern only is kept as it is", async () => {
    const a = advised(() => ({ pattern: "TIMEOUT" }));
    await a.fail("???");
    await a.clock.advance(1);
    expect(a.advice).toEqual([
      {
        agent: "test-agent",
        tool: "t",
        at: expect.any(Number) as number,
        advice: { pattern: "TIMEOUT" },
      },
    ]);
    expect(a.sh.unknownSamples("t")[0]?.advice).toEqual({
      tool: "t",
      advice: { pattern: "TIMEOUT" },
    });
  });

  it("each answer is filed with the sample it is about", async () => {
    const a = advised((text) => ({ pattern: text === "first" ? "TIMEOUT" : "AUTH" }), {
      delayMs: 1_000,
    });
    await a.fail("first");
    await a.clock.advance(10);
    await a.fail("second");
    await a.clock.advance(1_000);
    expect(a.sh.unknownSamples("t").map((s) => [s.text, s.advice?.advice?.pattern])).toEqual([
      ["first", "TIMEOUT"],
      ["second", "AUTH"],
    ]);
  });

  it("an answer about a sample no longer kept is still reported", async () => {
    const a = advised((text) => ({ pattern: text === "first" ? "TIMEOUT" : "AUTH" }), {
      delayMs: 1_000,
      keepSamples: 1,
    });
    await a.fail("first");
    await a.clock.advance(10);
    await a.fail("second"); // "first" leaves the kept samples before its answer comes
    await a.clock.advance(1_000);
    expect(a.advice.map((x) => x.advice?.pattern)).toEqual(["TIMEOUT", "AUTH"]);
    expect(a.sh.unknownSamples("t").map((s) => [s.text, s.advice?.advice?.pattern])).toEqual([
      ["second", "AUTH"],
    ]);
  });
});
