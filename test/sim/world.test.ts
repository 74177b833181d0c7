import { describe, expect, it } from "vitest";
import type { Fault } from "../../src/sim/scenarios.js";
import { doubleCharges, pageKind, scoreCalls, wastedAttempts } from "../../src/sim/score.js";
import { createWorld, type AttemptRecord, type CallRecord } from "../../src/sim/world.js";

import { MIN, openai, payments, testScenario } from "./test-world.js";

/** A world whose only fault is `fault` on `dependency`, from the start to `toMs`. */
function worldWith(fault: Fault, dependency = "payments", toMs = 60 * MIN) {
  const scenario = testScenario(fault, dependency, toMs);
  const record = createWorld(scenario, () => undefined);
  const begin = (id: string, op: CallRecord["op"] = "charge") => {
    record.calls.set(id, { id, op, startMs: record.world.elapsed(), attempts: [] });
  };
  /** One request, settled with the clock moved as far as it needs (20 s). */
  const send = async (
    dep: typeof openai,
    call: string,
    options: { timeoutMs?: number; key?: string } = {},
  ) => {
    const { clock } = record.world;
    const controller = new AbortController();
    const cancel =
      options.timeoutMs === undefined
        ? undefined
        : clock.setTimer(options.timeoutMs, () => {
            controller.abort(new Error("timed out"));
          });
    const out = record.world
      .behave({ dep, call, signal: controller.signal, key: options.key })
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error: error as Error & { status?: number; headers?: Headers } }),
      );
    await clock.advance(20_000);
    cancel?.();
    return out;
  };
  return { ...record, begin, send };
}

describe("the simulated world: faults with real semantics", () => {
  it("a throttled dependency answers 429 with the seconds left until its period ends, then answers", async () => {
    // The fault window is 1 ms: the throttled period it starts outlives it.
    const w = worldWith(
      { kind: "rate_limit", rate: 1, throttleSeconds: 15, retryAfter: true },
      "payments",
      1,
    );
    const at = async (ms: number) => {
      await w.world.clock.advance(ms - w.world.elapsed());
      w.begin(`o${ms}`);
      const out = w.world.behave({ dep: payments, call: `o${ms}`, signal: undefined }).then(
        () => "ok",
        (error: unknown) => {
          const e = error as { status: number; headers: Headers };
          return `${e.status} ${e.headers.get("retry-after")}`;
        },
      );
      await w.world.clock.advance(1_000); // an answer takes 200 ms
      return out;
    };
    expect(await at(0)).toBe("429 15");
    expect(await at(6_500)).toBe("429 9");
    expect(await at(14_999)).toBe("429 1");
    expect(await at(16_000)).toBe("ok");
    expect(w.calls.get("o0")?.attempts[0]).toMatchObject({
      result: "rate_limit",
      throttledUntilMs: 15_000,
    });
  });

  it("after a throttled period the quota is refilled: calls pass for as long again", async () => {
    const w = worldWith({ kind: "rate_limit", rate: 1, throttleSeconds: 15, retryAfter: true });
    const at = async (ms: number) => {
      await w.world.clock.advance(ms - w.world.elapsed());
      w.begin(`o${ms}`);
      const out = w.world.behave({ dep: payments, call: `o${ms}`, signal: undefined }).then(
        () => "ok",
        (error: unknown) => `${(error as { status: number }).status}`,
      );
      await w.world.clock.advance(500);
      return out;
    };
    expect(await at(0)).toBe("429");
    expect(await at(15_000)).toBe("ok");
    expect(await at(29_000)).toBe("ok");
    expect(await at(30_000)).toBe("429"); // rate 1: the next period starts at once
  });

  it("without Retry-After the 429 carries no header but the period is the same", async () => {
    const w = worldWith({ kind: "rate_limit", rate: 1, throttleSeconds: 15, retryAfter: false });
    w.begin("o");
    const out = await w.send(payments, "o");
    expect(out).toMatchObject({ error: { status: 429 } });
    expect((out as { error: { headers: Headers } }).error.headers.get("retry-after")).toBeNull();
    expect(w.calls.get("o")?.attempts[0]?.throttledUntilMs).toBe(15_000);
  });

  it("a bad request fails the same call on every attempt, and only the share it names", async () => {
    const w = worldWith(
      { kind: "bad_request", share: 0.25, fault: "context_length" },
      "openai",
      Infinity,
    );
    const failing: string[] = [];
    for (let i = 0; i < 200; i++) {
      w.begin(`q${i}`, "complete");
      const out = await w.send(openai, `q${i}`);
      if ("error" in out) {
        expect(out.error.status).toBe(400);
        failing.push(`q${i}`);
      }
    }
    expect(failing.length).toBeGreaterThan(30);
    expect(failing.length).toBeLessThan(70);
    for (const id of failing.slice(0, 5)) {
      expect(await w.send(openai, id)).toMatchObject({ error: { status: 400 } }); // again: same fate
      expect(w.calls.get(id)?.attempts.map((a) => a.result)).toEqual([
        "bad_request",
        "bad_request",
      ]);
    }
  });

  it("a revoked key answers 401 to every call", async () => {
    const w = worldWith({ kind: "auth" });
    for (const id of ["a", "b"]) {
      w.begin(id);
      expect(await w.send(payments, id)).toMatchObject({ error: { status: 401 } });
    }
  });

  it("a ghost write is charged although the client timed out; a retry without a key charges again, with the key it does not", async () => {
    const w = worldWith({ kind: "ghost_write", rate: 1, delayMs: 8_000 });
    w.begin("keyless");
    expect(await w.send(payments, "keyless", { timeoutMs: 5_000 })).toMatchObject({
      error: { message: "timed out" },
    });
    expect(w.calls.get("keyless")?.attempts[0]?.result).toBe("ghost_write");
    await w.send(payments, "keyless", { timeoutMs: 5_000 });
    expect(w.charges.get("keyless")).toBe(2);

    w.begin("keyed");
    await w.send(payments, "keyed", { timeoutMs: 5_000, key: "k-1" });
    await w.send(payments, "keyed", { timeoutMs: 5_000, key: "k-1" });
    await w.send(payments, "keyed", { timeoutMs: 5_000, key: "k-1" });
    expect(w.charges.get("keyed")).toBe(1);
    expect(doubleCharges(w.charges)).toBe(1);
  });

  it("a client that waits long enough gets the ghost write's answer", async () => {
    const w = worldWith({ kind: "ghost_write", rate: 1, delayMs: 8_000 });
    w.begin("patient");
    expect(await w.send(payments, "patient")).toEqual({ value: "charged patient" });
    expect(w.calls.get("patient")?.attempts[0]?.result).toBe("ok");
  });

  it("an answer slower than the caller's timeout is recorded as a timeout, and costs its price", async () => {
    const w = worldWith({ kind: "timeout", rate: 1 }, "openai");
    w.begin("q", "complete");
    expect(await w.send(openai, "q", { timeoutMs: 10_000 })).toMatchObject({ error: {} });
    expect(w.calls.get("q")?.attempts[0]).toMatchObject({
      result: "timeout",
      usd: 0.002,
      atMs: 0,
      endMs: 10_000,
    });
  });

  it("refuses a request for a call it was not told of", async () => {
    const w = worldWith({ kind: "auth" });
    await expect(
      w.world.behave({ dep: payments, call: "nobody", signal: undefined }),
    ).rejects.toThrow('request for unknown call "nobody"');
  });
});

const attempt = (
  dependency: string,
  result: AttemptRecord["result"],
  atMs: number,
  extra: Partial<AttemptRecord> = {},
): AttemptRecord => ({
  dependency,
  atMs,
  endMs: atMs + 100,
  result,
  usd: dependency === "openai" ? 0.002 : 0.003,
  ...extra,
});
const callOf = (ok: boolean, ...attempts: AttemptRecord[]): CallRecord => ({
  id: "c",
  op: "complete",
  startMs: 0,
  endMs: (attempts.at(-1)?.endMs ?? 0) + 0,
  ok,
  attempts,
});

describe("scoring: one rule for every policy", () => {
  it("every retry of a call that still failed is wasted", () => {
    expect(
      wastedAttempts(
        callOf(
          false,
          attempt("openai", "timeout", 0),
          attempt("openai", "timeout", 1_000),
          attempt("anthropic", "timeout", 2_000),
        ),
      ),
    ).toBe(2);
    expect(wastedAttempts(callOf(false, attempt("openai", "timeout", 0)))).toBe(0);
  });

  it("in a call that answered, same-route retries of a non-retryable error are wasted, another route is not", () => {
    const call = callOf(
      true,
      attempt("openai", "bad_request", 0),
      attempt("openai", "bad_request", 1_000),
      attempt("anthropic", "ok", 2_000),
    );
    expect(wastedAttempts(call)).toBe(1);
    expect(
      wastedAttempts(callOf(true, attempt("openai", "auth", 0), attempt("anthropic", "ok", 100))),
    ).toBe(0);
  });

  it("a retry sent before the throttled period ends is wasted, one after it is not", () => {
    const throttled = { throttledUntilMs: 15_000 };
    expect(
      wastedAttempts(
        callOf(
          true,
          attempt("payments", "rate_limit", 0, throttled),
          attempt("payments", "rate_limit", 1_000, throttled),
          attempt("payments", "rate_limit", 3_000, throttled),
          attempt("payments", "ok", 15_000),
        ),
      ),
    ).toBe(2);
    expect(
      wastedAttempts(
        callOf(
          true,
          attempt("payments", "rate_limit", 0, throttled),
          attempt("payments", "ok", 15_000),
        ),
      ),
    ).toBe(0);
  });

  it("spend counts every request; recovery spend those after a call's first; MTTR runs from the first failure's end", () => {
    const recovered = callOf(
      true,
      attempt("openai", "timeout", 0),
      attempt("anthropic", "ok", 10_000),
    );
    const clean = callOf(true, attempt("openai", "ok", 0));
    const lost = callOf(false);
    const f = scoreCalls([recovered, clean, lost]);
    expect(f.spendUsd).toBeCloseTo(0.002 + 0.003 + 0.002);
    expect(f.recoverySpendUsd).toBeCloseTo(0.003);
    expect(f.incidents).toBe(2); // the recovered call, and the one refused without a request
    expect(f.recovered).toBe(1);
    expect(f.recoveryTimesMs).toEqual([10_100 - 100]);
  });

  it("pages by what the call's last request came to, or that it sent none", () => {
    expect(
      pageKind(callOf(false, attempt("openai", "timeout", 0), attempt("anthropic", "auth", 1))),
    ).toBe("complete/anthropic/auth");
    expect(pageKind(callOf(false))).toBe("complete/refused");
  });
});
