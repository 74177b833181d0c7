import { describe, expect, it } from "vitest";
import type { SelfHealEvents } from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

type Seen = { [K in keyof SelfHealEvents]: [K, SelfHealEvents[K]] }[keyof SelfHealEvents];

/** Subscribes to every event a call's path emits, keeping them in order. */
function listenToAll(sh: ReturnType<typeof virtualInstance>["sh"]): Seen[] {
  const seen: Seen[] = [];
  sh.on("diagnosis", (e) => seen.push(["diagnosis", e]));
  sh.on("recovery", (e) => seen.push(["recovery", e]));
  sh.on("tool-call", (e) => seen.push(["tool-call", e]));
  sh.on("circuit-change", (e) => seen.push(["circuit-change", e]));
  return seen;
}

describe("events of a call", () => {
  it("a failed, recovered call: its diagnosis, then its recovery, then the call, all in its task", async () => {
    const { sh, clock } = virtualInstance({
      recovery: { random: () => 0, plans: { SERVICE_DOWN: ["retry_once"] } },
    });
    const seen = listenToAll(sh);
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      if (++calls === 1)
        throw thrownFault("http_503", { message: "down, key sk-proj-abcdefghijklmnopqrstuvwx" });
      return "found";
    });
    const started = clock.now();
    await expect(
      clock.run(
        sh.task("task-1", () => t(undefined)),
        { stepMs: 10 },
      ),
    ).resolves.toBe("found");
    expect(seen.map(([name]) => name)).toEqual(["diagnosis", "recovery", "tool-call"]);
    const [[, diagnosis], [, recovery], [, call]] = seen as [
      ["diagnosis", SelfHealEvents["diagnosis"]],
      ["recovery", SelfHealEvents["recovery"]],
      ["tool-call", SelfHealEvents["tool-call"]],
    ];
    expect(diagnosis).toMatchObject({
      agent: "test-agent",
      tool: "search",
      pattern: "SERVICE_DOWN",
      status: 503,
      at: started,
      taskId: "task-1",
    });
    expect(diagnosis.message).toContain("[REDACTED_KEY]");
    expect(diagnosis.message).not.toContain("sk-proj");
    expect(recovery).toMatchObject({ taskId: "task-1", outcome: "recovered", at: started + 250 });
    expect(call).toMatchObject({
      tool: "search",
      outcome: "recovered",
      taskId: "task-1",
      durationMs: 250,
      failedAttempts: 1,
    });
  });
});

describe("close()", () => {
  it("detaches every listener: a call still in flight when the instance closes reaches none of them", async () => {
    const { sh, clock } = virtualInstance({
      recovery: { random: () => 0, plans: { SERVICE_DOWN: ["retry_once", "circuit_break"] } },
    });
    const seen = listenToAll(sh);
    const t = sh.tool("search", { readOnly: true }, async () => {
      await clock.sleep(1_000);
      throw thrownFault("http_503");
    });
    // Before close(), such a call is heard from start to end.
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    expect(seen.map(([name]) => name)).toEqual([
      "diagnosis",
      "diagnosis",
      "circuit-change",
      "recovery",
      "tool-call",
    ]);
    seen.length = 0;
    await clock.advance(5_000); // the breaker's open period
    const inFlight = t(undefined).catch((e: unknown) => e);
    await clock.advance(10);
    expect(seen.map(([name, e]) => `${name}:${"state" in e ? e.state : ""}`)).toEqual([
      "circuit-change:half_open", // the call went out as the breaker's probe
    ]);
    seen.length = 0;
    await sh.close();
    await clock.advance(5_000);
    await expect(inFlight).resolves.toMatchObject({ status: 503 });
    expect(seen).toEqual([]);
  });
});
