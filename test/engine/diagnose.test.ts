/**
 * What the engine does with each diagnosis (src/engine/diagnose.ts): the agent.diagnosis span
 * and its evidence attributes, the `diagnosis` event, and the UNKNOWN advisor asked off the call
 * path, once per UNKNOWN error and never for a known pattern.
 */
import { describe, expect, it } from "vitest";
import { HttpResponseError } from "../../src/index.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();

const diagnosisSpan = () => otel.named("agent.diagnosis").at(-1)?.attributes;

describe("the engine's diagnosis of a failed call", () => {
  it("puts the status and the Retry-After it was given on the span; a bare error has neither", async () => {
    otel.reset();
    const { sh } = virtualInstance({ tracerProvider: otel.provider, recovery: NO_RECOVERY });
    const limited = new HttpResponseError(
      429,
      new Headers({ "retry-after": "3" }),
      "",
      "https://api.example.com",
    );
    await sh
      .tool("limited", { readOnly: true }, () => Promise.reject(limited))(undefined)
      .catch(() => undefined);
    expect(diagnosisSpan()).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.retry_after_ms": 3_000,
      "http.response.status_code": 429,
    });
    await sh
      .tool("bare", { readOnly: true }, () =>
        Promise.reject(new Error("flux capacitor misaligned")),
      )(undefined)
      .catch(() => undefined);
    const bare = diagnosisSpan();
    expect(bare?.["selfheal.diagnosis.pattern"]).toBe("UNKNOWN");
    expect(bare?.["selfheal.diagnosis.retry_after_ms"]).toBeUndefined();
    expect(bare?.["http.response.status_code"]).toBeUndefined();
    expect(bare?.["selfheal.diagnosis.status_page"]).toBeUndefined();
  });

  it("emits the diagnosis with the call's tool, message and task, only to listeners", async () => {
    const { sh } = virtualInstance({ recovery: NO_RECOVERY });
    const fail = sh.tool("t", { readOnly: true }, () =>
      Promise.reject(new Error("503 Service Unavailable")),
    );
    await fail(undefined).catch(() => undefined); // no listener yet: nothing to build
    const seen: {
      pattern: string;
      tool: string;
      message: string;
      taskId?: string | undefined;
      agent: string;
    }[] = [];
    sh.on("diagnosis", (d) => seen.push(d));
    await sh.task("task-9", () => fail(undefined)).catch(() => undefined);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      pattern: "SERVICE_DOWN",
      tool: "t",
      agent: "test-agent",
      message: "503 Service Unavailable",
      taskId: "task-9",
    });
  });

  it("asks the advisor about an UNKNOWN error only, with the tool and text, and emits its advice", async () => {
    const asked: { tool: string; text: string }[] = [];
    const { sh, clock } = virtualInstance({
      recovery: NO_RECOVERY,
      diagnosis: {
        escalateUnknown: (_error, context) => {
          asked.push({ tool: context.tool, text: context.text });
          return { pattern: "SERVICE_DOWN", confidence: 0.5 };
        },
      },
    });
    const advice: { agent: string; at: number }[] = [];
    sh.on("diagnosis-advice", (a) => advice.push(a));
    const lookup = sh.tool("lookup", { readOnly: true }, (text: string) =>
      Promise.reject(new Error(text)),
    );
    const fail = (text: string) => lookup(text).catch(() => undefined);
    await fail("429 Too Many Requests");
    await fail("the gremlins are back");
    await clock.advance(0);
    expect(asked).toEqual([{ tool: "lookup", text: "the gremlins are back" }]);
    expect(advice).toHaveLength(1);
    expect(advice[0]?.agent).toBe("test-agent");
    expect(advice[0]?.at).toBe(clock.now());
  });
});
