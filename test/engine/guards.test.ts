// Guards against mistakes an agent author makes (issue 27): each is a clear error or warning
// that names the fix, or a status that tells the truth.
import { SpanStatusCode } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import {
  createSelfHealing,
  HttpResponseError,
  isHttpResponseError,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
  type AgentSignals,
  type CallRecord,
  type SignalStore,
  type TaskRecord,
} from "../../src/index.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { thrownFault, VirtualClock } from "../../src/testing/index.js";
import { configError, recordingPager, virtualInstance } from "../helpers/engine.js";

const S = 1_000;

/** A fetch Response as an HTTP API would answer. */
const response = (status: number, body = "", headers: Record<string, string> = {}) =>
  new Response(body, { status, headers });

describe("a tool that throws HttpResponseError.from(res) without await", () => {
  /** A tool over `answers` (one Response made per attempt; the last repeats) that forgets the await. */
  function forgetful(answers: (() => Response)[], recovery = {}) {
    const vi = virtualInstance({ recovery: { random: () => 0, ...recovery } });
    const diagnoses: { pattern: string; retryAfterMs: number | undefined }[] = [];
    vi.sh.on("diagnosis", (d) =>
      diagnoses.push({ pattern: d.pattern, retryAfterMs: d.retryAfterMs }),
    );
    let sent = 0;
    const t = vi.sh.tool("search", { readOnly: true }, async (_q: string) => {
      const res = (answers[Math.min(sent++, answers.length - 1)] ?? (() => response(500)))();
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      if (!res.ok) throw HttpResponseError.from(res);
      return res.text();
    });
    return { ...vi, t, diagnoses, sent: () => sent };
  }

  it("the 429 inside is diagnosed RATE_LIMIT (its Retry-After honoured) and recovered; the log says once how to fix the tool", async () => {
    const { t, clock, diagnoses, warnings, sent } = forgetful([
      () => response(429, '{"error":{"message":"slow down"}}', { "retry-after": "2" }),
      () => response(200, "found"),
    ]);
    const detailed = t.detailed("q");
    await expect(clock.run(detailed, { stepMs: 100 })).resolves.toMatchObject({
      value: "found",
      outcome: "recovered",
    });
    expect(diagnoses).toEqual([{ pattern: "RATE_LIMIT", retryAfterMs: 2 * S }]);
    expect(sent()).toBe(2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('tool "search" threw a Promise');
    expect(warnings[0]).toContain("throw await HttpResponseError.from(res)");
    // Once per tool: the next call that makes the same mistake says nothing more.
    await clock.run(t("again"), { stepMs: 100 });
    expect(sent()).toBe(3);
    expect(warnings).toHaveLength(1);
  });

  it("when nothing recovers, the caller gets the HttpResponseError itself, never a Promise", async () => {
    const { t, clock } = forgetful([() => response(400, '{"error":{"code":"invalid_request"}}')]);
    const error = await clock.run(t("q")).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(Promise);
    expect(isHttpResponseError(error) && error.status).toBe(400);
  });

  it("a plain function that throws the promise is healed the same way", async () => {
    const { sh, clock, warnings } = virtualInstance({ recovery: { random: () => 0 } });
    const t = sh.tool("lookup", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw HttpResponseError.from(response(404));
    });
    const error = await clock.run(t(undefined)).catch((e: unknown) => e);
    expect(isHttpResponseError(error) && error.status).toBe(404);
    expect(warnings.join("\n")).toContain("await HttpResponseError.from(res)");
  });

  it("a thrown promise of something that is no error, or one that rejects, stays what was thrown", async () => {
    const { sh, clock } = virtualInstance();
    const number = Promise.resolve(42);
    const t = sh.tool("a", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw number;
    });
    await expect(clock.run(t(undefined))).rejects.toBe(number);
    const rejected = Promise.reject(new Error("inner"));
    const u = sh.tool("b", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw rejected;
    });
    await expect(clock.run(u(undefined))).rejects.toBe(rejected);
  });

  it("a thrown promise that never settles is ended by the attempt's timeout", async () => {
    const { sh, clock } = virtualInstance();
    const t = sh.tool("a", { readOnly: true, timeoutMs: 2 * S }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw new Promise(() => undefined);
    });
    const started = clock.now();
    const error = await clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "ToolTimeoutError" });
    expect(clock.now() - started).toBe(2 * S);
  });
});

describe("a thrown promise or thenable, at the edges", () => {
  it("is said once per tool: two tools that make the mistake are each named", async () => {
    const { sh, clock, warnings } = virtualInstance();
    const make = (name: string) =>
      sh.tool(name, { readOnly: true }, () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
        throw Promise.resolve(Object.assign(new Error("bad"), { status: 400 }));
      });
    const [a, b] = [make("a"), make("b")];
    for (const t of [a, b, a, b]) await clock.run(t(undefined)).catch(() => undefined);
    expect(warnings.map((w) => /tool "(\w)"/.exec(w)?.[1])).toEqual(["a", "b"]);
  });

  it("a thenable that is not a Promise is adopted; its error is what the caller gets", async () => {
    const { sh, clock } = virtualInstance();
    const inner = Object.assign(new Error("bad request"), { status: 400 });
    const t = sh.tool("a", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw {
        then: (resolve: (v: unknown) => void) => {
          resolve(inner);
        },
      };
    });
    await expect(clock.run(t(undefined))).rejects.toBe(inner);
  });

  it("resolving to selfheal's own error from another copy of the package counts as an error", async () => {
    const { sh, clock } = virtualInstance();
    const foreign = Object.assign(Object.create(null) as object, {
      [Symbol.for("selfheal:error")]: true,
      message: "from another copy",
    });
    const t = sh.tool("a", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw Promise.resolve(foreign);
    });
    await expect(clock.run(t(undefined))).rejects.toBe(foreign);
  });

  it("a value whose then cannot be read, or a plain string, stays what was thrown", async () => {
    const { sh, clock } = virtualInstance();
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error("no reading me");
        },
      },
    );
    const t = sh.tool("a", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw hostile;
    });
    await expect(clock.run(t(undefined))).rejects.toBe(hostile);
    const u = sh.tool("b", { readOnly: true }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw "then";
    });
    await expect(clock.run(u(undefined))).rejects.toBe("then");
  });

  it("one that settles after the attempt's timeout changes nothing: one call, one ending", async () => {
    const { sh, clock } = virtualInstance();
    const ends: string[] = [];
    sh.on("tool-call", (e) => ends.push(e.outcome));
    const t = sh.tool("a", { readOnly: true, timeoutMs: 1_000 }, () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the mistake under test
      throw clock.sleep(3_000).then(() => new Error("late"));
    });
    const error = await clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "ToolTimeoutError" });
    await clock.advance(5_000);
    expect(ends).toEqual(["error"]);
  });
});

describe("a misspelt provider is refused, naming `providers`", () => {
  const declared = { recovery: { providers: [{ name: "openai" }, { name: "anthropic" }] } };

  it('`provider: "opnai"` with openai declared: the field, the right name and `providers`', () => {
    const { sh } = virtualInstance(declared);
    const error = configError(() =>
      sh.tool("chat", { readOnly: true, provider: "opnai" }, () => "hi"),
    );
    expect(error.field).toBe('tool("chat").options.provider');
    expect(error.message).toContain('"opnai" looks like a misspelling of "openai"');
    expect(error.message).toContain(
      '`providers` (plural, each declared in recovery.providers), e.g. providers: ["openai"]',
    );
  });

  it("with nothing declared, a misspelling of a well-known provider name is refused too", () => {
    const { sh } = virtualInstance();
    const error = configError(() =>
      sh.tool("chat", { readOnly: true, provider: "anthropc" }, () => "hi"),
    );
    expect(error.message).toContain('misspelling of "anthropic"');
    expect(error.message).toContain('declare it: recovery.providers: [{ name: "anthropc" }]');
  });

  it("`providers` naming an undeclared near miss says which one was meant", () => {
    const { sh } = virtualInstance(declared);
    const error = configError(() =>
      sh.tool("chat", { readOnly: true, providers: ["openai", "antropic"] }, () => "hi"),
    );
    expect(error.field).toBe('tool("chat").options.providers');
    expect(error.message).toContain(
      '"antropic" is not declared in recovery.providers (did you mean "anthropic"?)',
    );
  });

  it.each([
    ["a name of its own", {}, "serpapi"],
    ["a well-known name in other letters", {}, "OpenAI"],
    ["a short name (too short to call a typo)", {}, "grok"],
    [
      "a declared name, however close to another",
      { recovery: { providers: [{ name: "opnai" }] } },
      "opnai",
    ],
  ])("accepts %s", (_what, options, provider) => {
    const { sh } = virtualInstance(options);
    expect(() => sh.tool("chat", { readOnly: true, provider }, () => "hi")).not.toThrow();
  });
});

describe("a plain-JS caller passing a tool two arguments", () => {
  it("is told the tool takes one argument object, and how; the tool never runs", async () => {
    const { sh } = virtualInstance();
    let ran = 0;
    const search = sh.tool(
      "search",
      { readOnly: true },
      (_a: { query: string; limit: number }) => ++ran,
    );
    const untyped = search as unknown as (...args: unknown[]) => Promise<unknown>;
    const error = await untyped("cats", 5).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error) && error.field).toBe("search(args, options)");
    expect(String(error)).toMatch(
      /expected an object, got number: a wrapped tool takes one argument/,
    );
    expect(String(error)).toContain("tool({ query, limit })");
    // An object of the tool's own arguments as the second: the same hint, naming the key.
    const second = await untyped("cats", { limit: 5 }).catch((e: unknown) => e);
    expect(isSelfHealConfigError(second) && second.field).toBe("search(args, options).limit");
    expect(String(second)).toMatch(
      /unknown option \(known: signal, .*\); a wrapped tool takes one argument/,
    );
    expect(ran).toBe(0);
  });
});

describe("an escalation with no notifier says nobody was told", () => {
  /** A tool whose 503s go straight to escalation. */
  function escalating(recovery = {}) {
    const vi = virtualInstance({
      recovery: { plans: { SERVICE_DOWN: ["escalate_to_human"] }, ...recovery },
    });
    const t = vi.sh.tool("lookup", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    return { ...vi, t };
  }

  it("1,000 failed calls: none claims a human was alerted, each names recovery.notifiers; the log says so once", async () => {
    const { t, warnings } = escalating();
    const errors: unknown[] = [];
    for (let i = 0; i < 1_000; i++) errors.push(await t(undefined).catch((e: unknown) => e));
    expect(errors.every(isHumanEscalationRequiredError)).toBe(true);
    const messages = new Set(errors.map(String));
    expect([...messages]).toEqual([
      'HumanEscalationRequiredError: selfheal: "lookup" failed with SERVICE_DOWN and could not be recovered; it needs a human, but no notifier is configured, so nobody was alerted (set recovery.notifiers: slackNotifier, webhookNotifier or pushoverNotifier from selfheal/notify)',
    ]);
    expect(errors[0]).toMatchObject({ notified: false, notifierConfigured: false });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /no notifier is configured, so nobody was alerted\. Set recovery\.notifiers/,
    );
  });

  it("with a notifier: the first is escalated to a human; one within throttleMs says no alert went out", async () => {
    const pages: string[] = [];
    const { t, warnings } = escalating({ notifiers: [recordingPager(pages)] });
    const first = await t(undefined).catch((e: unknown) => e);
    expect(String(first)).toMatch(/could not be recovered; escalated to a human$/);
    expect(first).toMatchObject({ notified: true, notifierConfigured: true });
    const throttled = await t(undefined).catch((e: unknown) => e);
    expect(throttled).toMatchObject({ notified: false, notifierConfigured: true });
    expect(String(throttled)).toMatch(
      /no alert went out for it \(one of its kind was sent within recovery\.throttleMs/,
    );
    expect(pages).toHaveLength(1);
    expect(warnings).toEqual([]);
  });
});

/** A memory store that counts its reads; `later` makes it answer them asynchronously (as Redis). */
function countingStore(later = false) {
  const inner = new MemorySignalStore();
  const counts = { reads: 0 };
  const store: SignalStore = {
    recordCall: (record: CallRecord, now: number) => {
      inner.recordCall(record, now);
    },
    recordTask: (record: TaskRecord, now: number) => {
      inner.recordTask(record, now);
    },
    read: (agent: string, now: number): AgentSignals | Promise<AgentSignals> => {
      counts.reads++;
      const signals = inner.read(agent, now);
      return later ? Promise.resolve(signals) : signals;
    },
  };
  return { store, counts };
}

const samplesOf = (signals: { signal: string; samples: number }[]) =>
  signals.find((s) => s.signal === "success_rate")?.samples;

describe("status() right after calls", () => {
  it("counts them, though the call path's report is cached for 5 s; `at` is a whole ms", async () => {
    // A clock with a fraction, as the system clock has.
    const clock = new VirtualClock(Date.UTC(2026, 0, 1) + 0.375);
    const sh = createSelfHealing({
      agent: "a",
      clock,
      logger: { warn: () => undefined },
      recovery: { unknown: "none" }, // the failure stays one failed call
    });
    let n = 0;
    const t = sh.tool("lookup", { readOnly: true }, () => {
      if (++n === 3) throw new Error("no");
      return n;
    });
    for (let i = 0; i < 3; i++) await clock.run(t(undefined)).catch(() => undefined);
    const status = await sh.status();
    expect(samplesOf(status.signals)).toBe(3);
    expect(samplesOf(status.tools.lookup?.signals ?? [])).toBe(3);
    expect(Number.isInteger(status.at)).toBe(true);
    expect(status.at).toBe(Math.floor(clock.now()));
  });

  it("keeps the cache where it matters: calls read the store once per cacheMs; status() reads again only after new records", async () => {
    const clock = new VirtualClock();
    const { store, counts } = countingStore();
    const sh = createSelfHealing({ agent: "a", clock, store, logger: { warn: () => undefined } });
    const t = sh.tool("lookup", { readOnly: true }, () => "ok");
    for (let i = 0; i < 20; i++) await t(undefined);
    expect(counts.reads).toBe(1); // the first call's guard; the other 19 used its report
    expect(samplesOf((await sh.status()).signals)).toBe(20);
    expect(counts.reads).toBe(2);
    await sh.status(); // nothing new since: the cached report
    expect(counts.reads).toBe(2);
    await t(undefined);
    expect(samplesOf((await sh.status()).signals)).toBe(21);
    expect(counts.reads).toBe(3);
    await clock.advance(5 * S); // the cache period passes: the call path reads again
    await t(undefined);
    expect(counts.reads).toBe(4);
  });

  it("from a store that answers later (Redis), status() waits for the read that counts the calls; calls still share one read", async () => {
    const clock = new VirtualClock();
    const { store, counts } = countingStore(true);
    const sh = createSelfHealing({ agent: "a", clock, store, logger: { warn: () => undefined } });
    const t = sh.tool("lookup", { readOnly: true }, () => "ok");
    for (let i = 0; i < 5; i++) await t(undefined);
    expect(samplesOf((await sh.status()).signals)).toBe(5);
    const reads = counts.reads;
    await clock.advance(5 * S); // the cached report expires: 20 calls at once read the store once
    await Promise.all(Array.from({ length: 20 }, () => t(undefined)));
    expect(counts.reads).toBe(reads + 1);
    expect(samplesOf((await sh.status()).signals)).toBe(25);
  });

  it("counts calls that other instrumentations' spans recorded", async () => {
    const { sh } = virtualInstance();
    expect(samplesOf((await sh.status()).signals)).toBe(0);
    sh.spanProcessor().onEnd({
      name: "execute_tool web_search",
      attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search" },
      status: { code: SpanStatusCode.UNSET },
      duration: [0, 5_000_000],
    });
    expect(samplesOf((await sh.status()).signals)).toBe(1);
  });
});
