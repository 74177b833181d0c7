import { describe, expect, it } from "vitest";
import {
  FAULT_KINDS,
  FailureInjector,
  VirtualClock,
  seededRandom,
  type FaultKind,
  type FaultOptions,
  type Trigger,
} from "../../src/testing/index.js";
import { stateOf, turns } from "./settle.js";

/** The kind of fault (or "-") of each of the next `n` calls. */
function schedule(inj: FailureInjector, n: number): string[] {
  return Array.from({ length: n }, () => inj.next().fault?.kind ?? "-");
}

describe("FailureInjector.next", () => {
  it("counts calls from 1 and returns the injection that fired, options included", () => {
    const inj = new FailureInjector();
    expect(inj.calls).toBe(0);
    expect(inj.next()).toEqual({ call: 1, fault: undefined });
    inj.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2, message: "m" });
    expect(inj.next()).toEqual({
      call: 2,
      fault: {
        kind: "rate_limit",
        trigger: { first: 1 },
        retryAfterSeconds: 2,
        message: "m",
      },
    });
    expect(inj.next()).toEqual({ call: 3, fault: undefined });
    expect(inj.calls).toBe(3);
  });

  it("first: N counts from when the injection was added, not from the first call", () => {
    const inj = new FailureInjector();
    expect(schedule(inj, 3)).toEqual(["-", "-", "-"]);
    inj.inject("http_502", { first: 2 });
    expect(schedule(inj, 3)).toEqual(["http_502", "http_502", "-"]);
    expect(inj.injected.get("http_502")).toBe(2);
  });

  it("first: 0 never fires", () => {
    const inj = new FailureInjector();
    inj.inject("auth", { first: 0 });
    expect(schedule(inj, 3)).toEqual(["-", "-", "-"]);
    expect(inj.injected.size).toBe(0);
  });

  it("counts injected faults by kind", () => {
    const inj = new FailureInjector();
    inj.inject("auth", { first: 1 });
    inj.inject("http_500", { first: 3 });
    inj.inject("empty", { first: 4 });
    expect(schedule(inj, 5)).toEqual(["auth", "http_500", "http_500", "empty", "-"]);
    expect([...inj.injected]).toEqual([
      ["auth", 1],
      ["http_500", 2],
      ["empty", 1],
    ]);
  });

  it("during: fires from fromMs (included) to toMs (excluded), counted from the injector's creation", async () => {
    const clock = new VirtualClock(5_000_000);
    await clock.advance(1_000); // time before the injector exists does not count
    const inj = new FailureInjector({ clock });
    inj.inject("http_503", { during: { fromMs: 100, toMs: 200 } });
    const at: [number, string][] = [];
    for (const ms of [0, 99, 1, 50, 49, 1, 50]) {
      await clock.advance(ms);
      at.push([clock.now() - 5_001_000, inj.next().fault?.kind ?? "-"]);
    }
    expect(at).toEqual([
      [0, "-"],
      [99, "-"],
      [100, "http_503"],
      [150, "http_503"],
      [199, "http_503"],
      [200, "-"],
      [250, "-"],
    ]);
  });

  it("during an empty window (fromMs = toMs) never fires", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    inj.inject("auth", { during: { fromMs: 0, toMs: 0 } });
    expect(schedule(inj, 2)).toEqual(["-", "-"]);
    await clock.advance(1);
    expect(schedule(inj, 1)).toEqual(["-"]);
  });

  it.each([
    ["probability 1 fires on every call", 1, "x"],
    ["probability 0 never fires", 0, "-"],
  ])("%s", (_name, probability, expected) => {
    const inj = new FailureInjector({ seed: 3 });
    inj.inject("empty", { probability });
    const outcomes = schedule(inj, 500).map((kind) => (kind === "-" ? "-" : "x"));
    expect(new Set(outcomes)).toEqual(new Set([expected]));
  });

  it.each([
    ["default seed 1", undefined, 1],
    ["seed 42", 42, 42],
    ["seed 0", 0, 0],
  ])("probability draws from seededRandom (%s), one draw per call", (_name, seed, used) => {
    const inj = new FailureInjector(seed === undefined ? {} : { seed });
    inj.inject("http_500", { probability: 0.5 });
    const random = seededRandom(used);
    const expected = Array.from({ length: 200 }, () => (random() < 0.5 ? "http_500" : "-"));
    expect(schedule(inj, 200)).toEqual(expected);
  });

  it("draws from the generator only when a probability trigger is reached", () => {
    const inj = new FailureInjector({ seed: 9 });
    inj.inject("auth", { first: 5 });
    inj.inject("http_500", { probability: 0.5 });
    const random = seededRandom(9);
    const expected = [
      ...Array.from({ length: 5 }, () => "auth"),
      ...Array.from({ length: 100 }, () => (random() < 0.5 ? "http_500" : "-")),
    ];
    expect(schedule(inj, 105)).toEqual(expected);
  });

  it("the first injection whose trigger fires decides, in the order they were added", () => {
    const inj = new FailureInjector();
    inj.inject("http_503", { probability: 0 });
    inj.inject("http_500", { first: 1 });
    inj.inject("auth", { probability: 1 });
    expect(schedule(inj, 3)).toEqual(["http_500", "auth", "auth"]);
  });
});

describe("FailureInjector: removing injections", () => {
  it("the returned function removes only its injection, and only once", () => {
    const inj = new FailureInjector();
    const removeA = inj.inject("auth", { first: 10 });
    inj.inject("http_500", { first: 1 });
    inj.inject("http_502", { first: 10 });
    removeA();
    removeA();
    expect(schedule(inj, 2)).toEqual(["http_500", "http_502"]);
    inj.clear();
    removeA();
    expect(schedule(inj, 1)).toEqual(["-"]);
  });

  it("clear() removes every injection; later ones work again", () => {
    const inj = new FailureInjector();
    inj.inject("auth", { first: 10 });
    inj.inject("http_500", { probability: 1 });
    inj.clear();
    expect(schedule(inj, 2)).toEqual(["-", "-"]);
    inj.inject("http_502", { first: 1 });
    expect(schedule(inj, 2)).toEqual(["http_502", "-"]);
  });
});

describe("FailureInjector: validation", () => {
  it("names every known kind when refusing an unknown one", () => {
    const inj = new FailureInjector();
    expect(() => inj.inject("gremlins" as FaultKind, { first: 1 })).toThrow(
      new TypeError(`unknown fault kind "gremlins" (known: ${FAULT_KINDS.join(", ")})`),
    );
  });

  it.each(FAULT_KINDS)("accepts kind %s", (kind) => {
    const inj = new FailureInjector();
    expect(typeof inj.inject(kind, { first: 1 })).toBe("function");
    expect(inj.next().fault?.kind).toBe(kind);
  });

  it.each([
    ["no key", {}, "a trigger has exactly one of first, during, probability"],
    ["two keys", { first: 1, during: { fromMs: 0, toMs: 1 } }, "exactly one"],
    ["first negative", { first: -1 }, "trigger.first must be a whole number >= 0"],
    ["first fractional", { first: 1.5 }, "trigger.first must be a whole number >= 0"],
    ["first NaN", { first: Number.NaN }, "trigger.first must be a whole number >= 0"],
    ["first Infinity", { first: Infinity }, "trigger.first must be a whole number >= 0"],
    ["during reversed", { during: { fromMs: 10, toMs: 9 } }, "trigger.during needs fromMs <= toMs"],
    [
      "during NaN",
      { during: { fromMs: Number.NaN, toMs: 9 } },
      "trigger.during needs fromMs <= toMs",
    ],
    ["probability > 1", { probability: 1.01 }, "trigger.probability must be between 0 and 1"],
    ["probability < 0", { probability: -0.01 }, "trigger.probability must be between 0 and 1"],
    ["probability NaN", { probability: Number.NaN }, "trigger.probability must be between 0 and 1"],
  ])("refuses a trigger with %s", (_name, trigger, message) => {
    const inj = new FailureInjector();
    expect(() => inj.inject("auth", trigger as Trigger)).toThrow(TypeError);
    expect(() => inj.inject("auth", trigger as Trigger)).toThrow(message);
    expect(schedule(inj, 1)).toEqual(["-"]); // nothing was added
  });

  it.each([
    ["first 0", { first: 0 }],
    ["first 3", { first: 3 }],
    ["during equal bounds", { during: { fromMs: 5, toMs: 5 } }],
    ["during", { during: { fromMs: -5, toMs: 5 } }],
    ["probability 0", { probability: 0 }],
    ["probability 1", { probability: 1 }],
  ])("accepts a trigger with %s", (_name, trigger) => {
    expect(() => new FailureInjector().inject("auth", trigger)).not.toThrow();
  });

  it.each([
    ["afterTokens -1", { afterTokens: -1 }, "afterTokens must be a whole number >= 0"],
    ["afterTokens 1.5", { afterTokens: 1.5 }, "afterTokens must be a whole number >= 0"],
    ["afterTokens NaN", { afterTokens: Number.NaN }, "afterTokens must be a whole number >= 0"],
    ["atToken 0", { atToken: 0 }, "atToken must be a whole number >= 1"],
    ["atToken 2.5", { atToken: 2.5 }, "atToken must be a whole number >= 1"],
    ["atToken -3", { atToken: -3 }, "atToken must be a whole number >= 1"],
    ["silentMs -1", { silentMs: -1 }, "silentMs must be a finite number of ms >= 0"],
    ["silentMs NaN", { silentMs: Number.NaN }, "silentMs must be a finite number of ms >= 0"],
    ["silentMs Infinity", { silentMs: Infinity }, "silentMs must be a finite number of ms >= 0"],
  ])("refuses options with %s", (_name, options, message) => {
    const inj = new FailureInjector();
    expect(() => inj.inject("stream_stall", { first: 1 }, options)).toThrow(new TypeError(message));
    expect(schedule(inj, 1)).toEqual(["-"]);
  });

  it.each([
    ["afterTokens 0", { afterTokens: 0 }],
    ["atToken 1", { atToken: 1 }],
    ["silentMs 0", { silentMs: 0 }],
    ["silentMs 1.5", { silentMs: 1.5 }],
    ["every field", { afterTokens: 3, atToken: 2, silentMs: 10, delayMs: 5, message: "m" }],
  ])("accepts options with %s", (_name, options: FaultOptions) => {
    const inj = new FailureInjector();
    inj.inject("stream_stall", { first: 1 }, options);
    expect(inj.next().fault).toEqual({ ...options, kind: "stream_stall", trigger: { first: 1 } });
  });
});

describe("FailureInjector.wrap", () => {
  it("without a fault calls the function with the same arguments and context", async () => {
    const inj = new FailureInjector();
    const seen: unknown[] = [];
    const context = { signal: new AbortController().signal, extra: 1 };
    const f = inj.wrap((args: { q: string }, ctx: typeof context) => {
      seen.push(args, ctx);
      return `answer to ${args.q}`;
    });
    const args = { q: "why" };
    await expect(f(args, context)).resolves.toBe("answer to why");
    expect(seen[0]).toBe(args);
    expect(seen[1]).toBe(context);
    expect(inj.calls).toBe(1);
  });

  it("a fault does not call the function", async () => {
    const inj = new FailureInjector();
    let called = 0;
    const f = inj.wrap(() => ++called);
    inj.inject("http_500", { first: 1 }, { message: "custom" });
    await expect(f(undefined, undefined)).rejects.toMatchObject({
      status: 500,
      message: "500 custom",
    });
    inj.inject("empty", { first: 1 });
    await expect(f(undefined, undefined)).resolves.toBe("");
    expect(called).toBe(0);
    await expect(f(undefined, undefined)).resolves.toBe(1);
  });

  it.each([
    ["connection_reset", { name: "TypeError", message: "fetch failed" }],
    ["malformed_json", { name: "SyntaxError", message: "Unexpected end of JSON input" }],
    ["content_policy", { status: 400, code: "content_policy_violation" }],
    ["context_length", { status: 400, code: "context_length_exceeded" }],
    ["http_502", { status: 502, name: "InternalServerError" }],
    ["overloaded", { status: 503, name: "InternalServerError" }],
  ] as const)("%s rejects with its error", async (kind, shape) => {
    const inj = new FailureInjector();
    inj.inject(kind, { first: 1 });
    await expect(inj.wrap(() => "ok")(undefined, undefined)).rejects.toMatchObject(shape);
  });

  it.each([
    ["finish_length", "is not an error but a truncated answer"],
    ["stream_cut", "only exists over HTTP streams"],
  ] as const)(
    "%s rejects naming the fake provider, without calling the function",
    async (kind, says) => {
      const inj = new FailureInjector();
      let called = 0;
      inj.inject(kind, { first: 1 });
      const error = await inj
        .wrap(() => ++called)(undefined, undefined)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toContain(says);
      expect((error as Error).message).toContain("startFakeProvider");
      expect(called).toBe(0);
    },
  );

  it("timeout without delayMs rejects at once, setting no timer", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    inj.inject("timeout", { first: 1 }, { message: "gave up" });
    const call = inj.wrap(() => "ok")(undefined, undefined);
    expect(clock.pendingTimers).toBe(0);
    expect(await stateOf(call)).toEqual({
      rejected: expect.objectContaining({ message: "gave up", code: "ETIMEDOUT" }) as unknown,
    });
  });

  it("timeout with delayMs waits exactly that long on the injector's clock", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    inj.inject("timeout", { first: 1 }, { delayMs: 30_000 });
    const call = inj.wrap(() => "ok")(undefined, {});
    await turns();
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(29_999);
    expect(await stateOf(call)).toBe("pending");
    await clock.advance(1);
    expect(await stateOf(call)).toEqual({
      rejected: expect.objectContaining({ name: "APIConnectionTimeoutError" }) as unknown,
    });
  });

  it("timeout's wait ends with the abort reason when the call's signal aborts", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    inj.inject("timeout", { first: 1 }, { delayMs: 30_000 });
    const controller = new AbortController();
    const call = inj.wrap((_: undefined, _ctx: { signal: AbortSignal }) => "ok")(undefined, {
      signal: controller.signal,
    });
    await turns();
    const reason = new Error("caller gave up");
    controller.abort(reason);
    expect(await stateOf(call)).toEqual({ rejected: reason });
    expect(clock.pendingTimers).toBe(0);
  });

  it("hang with an already aborted signal rejects at once with its reason", async () => {
    const inj = new FailureInjector();
    inj.inject("hang", { first: 1 });
    const reason = new Error("already aborted");
    const call = inj.wrap(() => "ok")(undefined, { signal: AbortSignal.abort(reason) });
    expect(await stateOf(call)).toEqual({ rejected: reason });
  });

  it("hang stays pending until the signal aborts, and for ever without a signal", async () => {
    const inj = new FailureInjector();
    inj.inject("hang", { first: 2 });
    const f = inj.wrap(() => "ok");
    const controller = new AbortController();
    const withSignal = f(undefined, { signal: controller.signal });
    const withoutContext = f(undefined, undefined);
    expect(await stateOf(withSignal)).toBe("pending");
    controller.abort();
    expect(await stateOf(withSignal)).toEqual({
      rejected: expect.objectContaining({ name: "AbortError" }) as unknown,
    });
    expect(await stateOf(withoutContext)).toBe("pending");
  });

  it("counts wrapped calls and faults like next()", async () => {
    const inj = new FailureInjector();
    inj.inject("auth", { first: 2 });
    const f = inj.wrap((n: number) => n);
    const outcomes = [];
    for (let i = 0; i < 4; i++)
      outcomes.push(
        await f(i, undefined).then(
          (n) => n,
          (e: unknown) => (e as { status: number }).status,
        ),
      );
    expect(outcomes).toEqual([401, 401, 2, 3]);
    expect(inj.calls).toBe(4);
    expect(inj.injected.get("auth")).toBe(2);
  });
});
