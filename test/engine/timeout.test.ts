import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { isToolTimeoutError, ToolTimeoutError, type CallContext } from "../../src/index.js";
import { CHILD_HANG_MS, builtJs } from "../helpers/built-js.js";
import { virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

/** A tool that waits for its signal, like a fetch to a server that never answers. */
function hangUntilAborted(_args: unknown, ctx: CallContext): Promise<never> {
  return new Promise((_resolve, reject) => {
    ctx.signal.addEventListener("abort", () => {
      reject(ctx.signal.reason);
    });
  });
}

/** Lets the event loop finish its turn (where an idle deadline timer is cancelled). */
const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("timeouts and cancellation", () => {
  it("aborts the tool's signal and rejects with ToolTimeoutError after timeoutMs", async () => {
    const { sh, clock } = virtualInstance();
    let seen: AbortSignal | undefined;
    const t = sh.tool("slow", { readOnly: true, timeoutMs: 2_000 }, (args: unknown, ctx) => {
      seen = ctx.signal;
      return hangUntilAborted(args, ctx);
    });
    const outcome = t(undefined).catch((e: unknown) => e);
    await clock.advance(1_999);
    expect(seen?.aborted).toBe(false);
    await clock.advance(1);
    const error = await outcome;
    expect(error).toBeInstanceOf(ToolTimeoutError);
    expect(error).toMatchObject({ tool: "slow", timeoutMs: 2_000 });
    expect(seen?.reason).toBe(error);
  });

  it("rejects on time even when the tool ignores its signal; the late answer is dropped", async () => {
    const otel = recordingProvider();
    const { sh, clock } = virtualInstance({ tracerProvider: otel.provider });
    let answered = 0;
    const t = sh.tool("stubborn", { readOnly: true, timeoutMs: 100 }, () =>
      clock.sleep(10_000).then(() => {
        answered++;
        return "late";
      }),
    );
    const calls: { outcome: string; durationMs: number }[] = [];
    sh.on("tool-call", (c) => calls.push({ outcome: c.outcome, durationMs: c.durationMs }));
    const outcome = t(undefined).catch((e: unknown) => e);
    await clock.advance(100);
    const error = await outcome;
    expect(isToolTimeoutError(error)).toBe(true);
    const before = otel.spans().map((s) => [s.name, s.attributes["selfheal.call.outcome"]]);
    expect(before).toEqual([
      ["agent.tool_call.error", undefined],
      ["agent.diagnosis", undefined],
      ["agent.tool_call", "error"],
    ]);

    await clock.advance(10_000);
    expect(answered).toBe(1); // the tool did answer, late...
    // ...and nothing heard it: one call record (the timeout), no new span, one health sample.
    expect(calls).toEqual([{ outcome: "error", durationMs: 100 }]);
    expect(otel.spans().map((s) => [s.name, s.attributes["selfheal.call.outcome"]])).toEqual(
      before,
    );
    await clock.advance(5_000);
    const health = (await sh.status()).tools.stubborn?.signals.find(
      (s) => s.signal === "success_rate",
    );
    expect(health?.samples).toBe(1);
    expect(clock.pendingTimers).toBe(0);
  });

  it("a per-call timeout overrides the tool's, and a settled call leaves no timer behind", async () => {
    const { sh, clock } = virtualInstance();
    const t = sh.tool(
      "t",
      { readOnly: true, timeoutMs: 60_000 },
      (_a: unknown, ctx) => ctx.timeoutMs,
    );
    await expect(t(undefined, { timeoutMs: 5 })).resolves.toBe(5);
    await endOfTurn(); // the deadline timer is shared by calls in a row, cancelled once idle
    expect(clock.pendingTimers).toBe(0);
  });

  it("a tool that throws synchronously under a deadline rejects with that error, timer cleared", async () => {
    const { sh, clock } = virtualInstance();
    const boom = new Error("sync boom");
    const t = sh.tool("t", { readOnly: true, timeoutMs: 1_000 }, () => {
      throw boom;
    });
    expect(await t(undefined).catch((e: unknown) => e)).toBe(boom);
    await endOfTurn();
    expect(clock.pendingTimers).toBe(0);
  });

  it("the caller's signal aborts the call with the caller's reason", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("t", { readOnly: true }, hangUntilAborted);
    const controller = new AbortController();
    const outcome = t(undefined, { signal: controller.signal }).catch((e: unknown) => e);
    const reason = new Error("user pressed stop");
    controller.abort(reason);
    expect(await outcome).toBe(reason);

    let ran = false;
    const u = sh.tool("u", { readOnly: true }, () => (ran = true));
    expect(await u(undefined, { signal: controller.signal }).catch((e: unknown) => e)).toBe(reason);
    expect(ran).toBe(false);
  });

  it("fires under forced garbage collection against a real server that never answers", async () => {
    // A deadline lost to a collection would hang the call: the child is then killed and its
    // output is not five timeouts. How soon they fire is not the test (issue 27).
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--expose-gc", builtJs("test/fixtures/gc-timeout.ts")],
      { timeout: CHILD_HANG_MS },
    );
    const { results } = JSON.parse(stdout) as { results: string[] };
    expect(results).toEqual(["timeout", "timeout", "timeout", "timeout", "timeout"]);
  }, 150_000);
});
