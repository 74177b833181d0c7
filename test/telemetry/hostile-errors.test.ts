import { SpanStatusCode } from "@opentelemetry/api";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { errorType } from "../../src/telemetry/spans.js";
import { describeThrown, redact } from "../../src/telemetry/redact.js";
import { VirtualClock } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-hostile-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const boom = (): never => {
  throw new Error("trap");
};

/**
 * How a call settled, without resolving a promise with the thrown value: resolving with a Proxy
 * reads its `then`, and the trap would throw in the test itself.
 */
const settled = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ rejected: false, value }),
    (value: unknown) => ({ rejected: true, value }),
  );

/** Each hostile value is built fresh per test: some are one-shot (revoked). */
const HOSTILE: [string, () => unknown][] = [
  [
    "an Error whose message getter throws",
    () => {
      const e = new Error("hidden");
      Object.defineProperty(e, "message", { get: boom });
      return e;
    },
  ],
  [
    "an Error whose name, message, stack and constructor getters all throw",
    () => {
      const e = new TypeError("hidden");
      // stack first: redefining it after message would format the stack, calling the getters
      for (const key of ["stack", "message", "name", "constructor", "cause"])
        Object.defineProperty(e, key, { get: boom });
      return e;
    },
  ],
  [
    "a Proxy whose every trap throws",
    () =>
      new Proxy(
        {},
        {
          get: boom,
          has: boom,
          getPrototypeOf: boom,
          ownKeys: boom,
          getOwnPropertyDescriptor: boom,
          defineProperty: boom,
          set: boom,
          deleteProperty: boom,
          isExtensible: boom,
          preventExtensions: boom,
          setPrototypeOf: boom,
        },
      ),
  ],
  [
    "a Proxy around an Error whose every trap throws",
    () => new Proxy(new Error("inner"), { get: boom, getPrototypeOf: boom, has: boom }),
  ],
  [
    "a revoked Proxy",
    () => {
      const { proxy, revoke } = Proxy.revocable(new Error("gone"), {});
      revoke();
      return proxy;
    },
  ],
  ["a frozen Error", () => Object.freeze(new Error("frozen password=hunter22"))],
  ["a frozen plain object", () => Object.freeze({ status: 418, message: "frozen teapot" })],
  [
    "an object whose toString, Symbol.toPrimitive and toJSON throw",
    () => ({
      toString: boom,
      valueOf: boom,
      [Symbol.toPrimitive]: boom,
      toJSON: boom,
    }),
  ],
  [
    "an Error whose toString and Symbol.toPrimitive throw",
    () => Object.assign(new Error("prim"), { toString: boom, [Symbol.toPrimitive]: boom }),
  ],
  [
    "a circular cause chain",
    () => {
      const a = new Error("a failed", { cause: undefined });
      const b = new Error("b failed", { cause: a });
      (a as { cause?: unknown }).cause = b;
      return a;
    },
  ],
  [
    "an object that is its own cause, with a cycle in its fields",
    () => {
      const o: Record<string, unknown> = { code: "E_LOOP" };
      o.cause = o;
      o.self = o;
      return o;
    },
  ],
  ["an Error with a number for a message", () => Object.assign(new Error(), { message: 42 })],
  [
    "an Error with an object for a message",
    () => Object.assign(new Error(), { message: { nested: "password=hunter22" } }),
  ],
  [
    "an object whose name is a control-character payload",
    () => ({ name: "Evil\u001b[2J\nName", message: "named" }),
  ],
];

describe("hostile thrown values: the caller gets the very value, the span still gets written", () => {
  it.each(HOSTILE)("%s", async (_name, make) => {
    otel.reset();
    const thrown = make();
    const { sh, clock, warnings } = virtualInstance({ tracerProvider: otel.provider });
    const tool = sh.tool("t", { readOnly: true }, () => Promise.reject(thrown));
    const caught = await clock.run(settled(tool(undefined)));
    expect(caught.rejected).toBe(true);
    expect(caught.value).toBe(thrown); // the very value thrown

    const spans = otel.spans();
    const call = spans.find((s) => s.name === "agent.tool_call");
    const attempt = spans.find((s) => s.name === "agent.tool_call.error");
    for (const span of [call, attempt]) {
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
      expect(typeof span?.status.message).toBe("string");
      expect(span?.status.message).not.toBe("");
      const message = String(span?.status.message);
      for (const bad of ["hunter22", "\n", "\u001b"]) expect(message).not.toContain(bad);
      const type = span?.attributes["error.type"];
      expect(typeof type).toBe("string");
      for (const bad of ["\n", "\u001b"]) expect(String(type)).not.toContain(bad);
    }
    expect(spans.map((s) => s.name)).toContain("agent.diagnosis");
    expect(warnings).toEqual([]);
    await sh.close();
  });

  it.each(HOSTILE)(
    "%s, through recovery, the event log and escalateUnknown",
    async (name, make) => {
      otel.reset();
      const eventLog = join(dir, `${String(HOSTILE.findIndex(([n]) => n === name))}.jsonl`);
      const thrown = make();
      const clock = new VirtualClock();
      const recovery: unknown[] = [];
      const texts: string[] = [];
      const sh = createSelfHealing({
        agent: "a",
        clock,
        tracerProvider: otel.provider,
        logger: { warn: () => undefined },
        recovery: { random: () => 0, eventLog }, // default plans: UNKNOWN is retried once
        diagnosis: {
          escalateUnknown: (_error, { text }) => {
            texts.push(text);
            return undefined;
          },
        },
      });
      sh.on("recovery", (e) => recovery.push(e));
      const tool = sh.tool("t", { readOnly: true }, () => Promise.reject(thrown));
      const caught = await clock.run(settled(tool(undefined)));
      expect(caught.rejected).toBe(true);
      expect(caught.value).toBe(thrown);
      await clock.advance(10_000);
      expect(recovery).toHaveLength(1);
      expect(texts.length).toBeGreaterThan(0);
      for (const text of texts) expect(typeof text).toBe("string");
      expect(sh.unknownSamples("t").every((s) => typeof s.text === "string")).toBe(true);
      await sh.close();
      const lines = (await readFile(eventLog, "utf8"))
        .split("\n")
        .filter((l) => l && (JSON.parse(l) as { type?: string }).type === undefined); // recoveries
      expect(lines).toHaveLength(1);
      expect(typeof (JSON.parse(lines[0] ?? "") as { error: unknown }).error).toBe("string");
    },
  );
});

describe("describeThrown and errorType never throw", () => {
  it.each(HOSTILE)("%s", (_name, make) => {
    const value = make();
    const text = describeThrown(value);
    expect(typeof text).toBe("string");
    expect(typeof redact(text)).toBe("string");
    expect(typeof errorType(value)).toBe("string");
  });

  it("says what it could read", () => {
    const e = new RangeError("hidden");
    Object.defineProperty(e, "message", { get: boom });
    expect(describeThrown(e)).toBe("RangeError (its message could not be read)");
    expect(errorType(e)).toBe("RangeError");
    expect(describeThrown(new Proxy({}, { get: boom, getPrototypeOf: boom }))).toBe(
      "unprintable value was thrown",
    );
    expect(describeThrown(Object.assign(new Error(), { message: 42 }))).toBe("Error");
    expect(errorType({ name: "Evil\u001b[2J\nName" })).toBe("Evil\\x1b[2J\\nName");
    expect(errorType({ name: "x".repeat(500) })).toHaveLength(64);
  });
});
