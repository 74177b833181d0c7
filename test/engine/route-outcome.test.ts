/**
 * What one attempt tells its route's breaker (src/engine/route-outcome.ts), with real diagnoses:
 * only structured evidence of a sick route counts against it, an answered failure closes a probe,
 * and a Retry-After (or the rule's cooldown) keeps calls away only when the evidence is structured.
 */
import { describe, expect, it } from "vitest";
import { recordOnRoute } from "../../src/engine/route-outcome.js";
import type { CircuitBreaker } from "../../src/recovery/breaker.js";
import { virtualInstance } from "../helpers/engine.js";

/** A breaker that writes down what it is told. */
function recordingBreaker() {
  const told: string[] = [];
  const breaker = {
    record: (at: number, ok: boolean, probe: boolean) =>
      told.push(`record ${ok ? "ok" : "failed"}${probe ? " probe" : ""} at ${at}`),
    coolDown: (at: number, ms: number) => told.push(`cool ${ms} at ${at}`),
  } as unknown as CircuitBreaker;
  return { breaker, told };
}

const { sh } = virtualInstance();
const diagnose = (error: Error) => sh.diagnose(error, { tool: "t" });
const status = (code: number, headers: Record<string, string> = {}) =>
  Object.assign(new Error(`HTTP ${code}`), { status: code, headers });

describe("recordOnRoute", () => {
  it("an answer is a success on the route, a probe's included", () => {
    const { breaker, told } = recordingBreaker();
    recordOnRoute(breaker, 5, undefined, false);
    recordOnRoute(breaker, 6, undefined, true);
    expect(told).toEqual(["record ok at 5", "record ok probe at 6"]);
  });

  it("a structured 503 counts against the route", async () => {
    const { breaker, told } = recordingBreaker();
    const d = await diagnose(status(503));
    recordOnRoute(breaker, 5, d, false);
    expect(told[0]).toBe("record failed at 5");
    expect(told.slice(1)).toEqual(d.cooldownMs > 0 ? [`cool ${d.cooldownMs} at 5`] : []);
  });

  it("a 429 shows the route is up: nothing against it, a probe closes it, Retry-After cools it", async () => {
    const d = await diagnose(status(429, { "retry-after": "7" }));
    expect(d.retryAfterMs).toBe(7_000);
    const plain = recordingBreaker();
    recordOnRoute(plain.breaker, 5, d, false);
    expect(plain.told).toEqual(["cool 7000 at 5"]);
    const probe = recordingBreaker();
    recordOnRoute(probe.breaker, 5, d, true);
    expect(probe.told).toEqual(["record ok probe at 5", "cool 7000 at 5"]);
  });

  it.each([
    ["wording alone", "Service Unavailable: the upstream is down, try again later"],
    ["an error nobody recognises", "flux capacitor misaligned"],
  ])(
    "%s counts nothing against the route and cools nothing; a probe that met it keeps away",
    async (_name, text) => {
      const d = await diagnose(new Error(text));
      expect(d.evidence).not.toBe("structured");
      const plain = recordingBreaker();
      recordOnRoute(plain.breaker, 5, d, false);
      expect(plain.told).toEqual([]);
      const probe = recordingBreaker();
      recordOnRoute(probe.breaker, 5, d, true);
      expect(probe.told).toEqual(["record failed probe at 5"]);
    },
  );
});
