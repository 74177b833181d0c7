import { describe, expect, it } from "vitest";
import { compileRules } from "../../src/diagnosis/rules.js";
import { isSelfHealConfigError } from "../../src/index.js";
import { PATTERNS, STRATEGIES } from "../../src/telemetry/conventions.js";

/** A valid rule to vary one field at a time. */
const base = {
  name: "billing",
  pattern: "AUTH",
  confidence: 0.9,
  match: { status: [402] },
};
const R = 'diagnosis.rules["billing"]';

/** The field and message of the config error `compileRules` throws, or undefined if it accepts. */
function rejection(rules: unknown): { field: string; message: string } | undefined {
  try {
    compileRules(rules);
    return undefined;
  } catch (e) {
    if (isSelfHealConfigError(e)) return { field: e.field, message: e.message };
    throw e;
  }
}

const withRule = (patch: Record<string, unknown>) => [{ ...base, ...patch }];
const withMatcher = (match: unknown) => withRule({ match });
const withSteps = (strategies: unknown) => withRule({ strategies });

describe("compileRules: the rule list and each rule", () => {
  it("accepts a valid rule", () => {
    expect(rejection([base])).toBeUndefined();
  });

  it.each([
    ["not a list", "x", "diagnosis.rules", "expected a list of rules"],
    ["null", [null], "diagnosis.rules[0]", "expected a rule object"],
    ["a number", [42], "diagnosis.rules[0]", "expected a rule object"],
    ["no name", [{ ...base, name: undefined }], "diagnosis.rules[0].name", "non-empty string"],
    ["a numeric name", [{ ...base, name: 42 }], "diagnosis.rules[0].name", "non-empty string"],
    ["an empty name", [{ ...base, name: "" }], "diagnosis.rules[0].name", "non-empty string"],
  ])("rejects %s", (_what, rules, field, problem) => {
    const r = rejection(rules);
    expect(r?.field).toBe(field);
    expect(r?.message).toContain(problem);
  });

  it("names the unknown field and lists the known ones", () => {
    expect(rejection(withRule({ retries: 2 }))).toEqual({
      field: `${R}.retries`,
      message: expect.stringContaining(
        "unknown rule field (known: name, pattern, confidence, match, strategies, cooldownMs)",
      ) as string,
    });
  });

  it("names an unknown pattern and lists the known ones", () => {
    expect(rejection(withRule({ pattern: "SLOW" }))).toEqual({
      field: `${R}.pattern`,
      message: expect.stringContaining(
        `unknown pattern "SLOW" (known: ${PATTERNS.join(", ")})`,
      ) as string,
    });
  });

  it.each([
    ["-0.1", -0.1],
    ["1.01", 1.01],
    ["a string", "0.9"],
    ["missing", undefined],
  ])("rejects confidence %s", (_what, confidence) => {
    expect(rejection(withRule({ confidence }))).toEqual({
      field: `${R}.confidence`,
      message: expect.stringContaining("expected a number from 0 to 1") as string,
    });
  });

  it.each([0, 1])("accepts confidence %s (the bounds)", (confidence) => {
    expect(compileRules(withRule({ confidence }))[0]?.confidence).toBe(confidence);
  });

  it.each([
    ["negative", -1],
    ["infinite", Infinity],
    ["NaN", NaN],
    ["a string", "5"],
  ])("rejects a %s cooldownMs", (_what, cooldownMs) => {
    expect(rejection(withRule({ cooldownMs }))).toEqual({
      field: `${R}.cooldownMs`,
      message: expect.stringContaining("expected a number of ms >= 0") as string,
    });
  });

  it("keeps a cooldownMs of 0 over the pattern's default; without one, the default applies", () => {
    const [zero] = compileRules([{ ...base, pattern: "RATE_LIMIT", cooldownMs: 0 }]);
    expect(zero?.cooldownMs).toBe(0);
    const [fallback] = compileRules([{ ...base, pattern: "RATE_LIMIT" }]);
    expect(fallback?.cooldownMs).toBe(5_000);
  });

  it("rejects an empty match list", () => {
    expect(rejection(withMatcher([]))).toEqual({
      field: `${R}.match`,
      message: expect.stringContaining("expected at least one matcher") as string,
    });
  });
});

describe("compileRules: matchers", () => {
  it.each([
    ["null", [null], `${R}.match[0]`],
    ["a string", ["x"], `${R}.match[0]`],
    ["a nested list", [[{ status: [500] }]], `${R}.match[0]`],
  ])("rejects a matcher that is %s", (_what, match, field) => {
    expect(rejection(withMatcher(match))).toEqual({
      field,
      message: expect.stringContaining("expected a matcher object") as string,
    });
  });

  it("names an unknown matcher field and lists the known ones", () => {
    expect(rejection(withMatcher({ text: [/x/] }))).toEqual({
      field: `${R}.match.text`,
      message: expect.stringContaining(
        "unknown matcher field (known: status, code, name, message, header, statusPageDegraded)",
      ) as string,
    });
  });

  it.each([
    ["nothing", {}],
    ["only the status page", { statusPageDegraded: true }],
  ])("rejects a matcher with %s to match on", (_what, match) => {
    expect(rejection(withMatcher(match))).toEqual({
      field: `${R}.match`,
      message: expect.stringContaining(
        "a matcher needs at least one of status, code, name, message, header",
      ) as string,
    });
  });

  it.each([
    ["a string", "500"],
    ["an empty list", []],
    ["below 100", [99]],
    ["above 599", [600]],
    ["a fraction", [500.5]],
    ["one bad code among good ones", [500, 42]],
  ])("rejects status %s", (_what, status) => {
    expect(rejection(withMatcher({ status }))).toEqual({
      field: `${R}.match.status`,
      message: expect.stringContaining("expected a non-empty list of HTTP status codes") as string,
    });
  });

  it("accepts status codes 100 and 599 (the bounds)", () => {
    expect(rejection(withMatcher({ status: [100, 599] }))).toBeUndefined();
  });

  it.each(["code", "name", "header"])(
    "%s: rejects anything but a non-empty list of strings",
    (key) => {
      for (const value of ["rate", [], [""], [42], ["a", ""]]) {
        expect(rejection(withMatcher({ [key]: value }))).toEqual({
          field: `${R}.match.${key}`,
          message: expect.stringContaining("expected a non-empty list of strings") as string,
        });
      }
      expect(rejection(withMatcher({ [key]: ["a", "b"] }))).toBeUndefined();
    },
  );

  it.each([
    ["a string", "payment", `${R}.match.message`, "expected a non-empty list of RegExp"],
    ["an empty list", [], `${R}.match.message`, "expected a non-empty list of RegExp"],
    [
      "a list with a string",
      [/ok/, "payment"],
      `${R}.match.message[1]`,
      "expected a RegExp (a string is not compiled for you)",
    ],
    [
      "a global regex",
      [/payment/g],
      `${R}.match.message[0]`,
      "the g and y flags make test() stateful; drop them",
    ],
    [
      "a sticky regex",
      [/payment/y],
      `${R}.match.message[0]`,
      "the g and y flags make test() stateful; drop them",
    ],
    [
      "a backreference",
      [/(a)\1/],
      `${R}.match.message[0]`,
      "a backreference (\\1) is not supported: selfheal matches your rules with a linear-time engine (RE2 syntax), see docs/diagnosis.md: /(a)\\1/",
    ],
    [
      "a lookahead, second in the list",
      [/payment/, /pay(?=ment)/],
      `${R}.match.message[1]`,
      "lookahead (?=...) is not supported",
    ],
  ])("rejects message as %s", (_what, message, field, problem) => {
    expect(rejection(withMatcher({ message }))).toEqual({
      field,
      message: expect.stringContaining(problem) as string,
    });
  });

  it.each([false, "yes", 1])("rejects statusPageDegraded: %s", (statusPageDegraded) => {
    expect(rejection(withMatcher({ status: [504], statusPageDegraded }))).toEqual({
      field: `${R}.match.statusPageDegraded`,
      message: expect.stringContaining("expected true") as string,
    });
  });

  it("compiles lists into lower-cased sets and leaves out the fields not given", () => {
    const [rule] = compileRules(
      withMatcher([
        { status: [429], header: ["Retry-After"] },
        { code: ["Rate_Limit"], name: ["RateLimitError"] },
        { message: [/slow down/i], statusPageDegraded: true },
      ]),
    );
    expect(rule?.matchers).toStrictEqual([
      {
        status: new Set([429]),
        header: ["retry-after"],
        statusPageDegraded: false,
        structured: true,
      },
      {
        code: new Set(["rate_limit"]),
        name: new Set(["ratelimiterror"]),
        statusPageDegraded: false,
        structured: true,
      },
      {
        message: [{ source: "slow down", test: expect.any(Function) as unknown }],
        statusPageDegraded: true,
        structured: true,
      },
    ]);
  });

  it("names each matcher of a list by its index, a single matcher without one", () => {
    expect(rejection(withMatcher([{ status: [500] }, { code: [] }]))?.field).toBe(
      `${R}.match[1].code`,
    );
    expect(rejection(withMatcher({ code: [] }))?.field).toBe(`${R}.match.code`);
  });
});

describe("compileRules: recovery chains", () => {
  it("rejects a chain that is not a list", () => {
    expect(rejection(withSteps("retry_once"))).toEqual({
      field: `${R}.strategies`,
      message: expect.stringContaining("expected a list of strategies") as string,
    });
  });

  it.each([
    ["an unknown name", ["pray"], '"pray"'],
    ["null", [null], "null"],
    ["an object without a strategy", [{ attempts: 2 }], "undefined"],
  ])("rejects a step that is %s, listing the known strategies", (_what, steps, shown) => {
    expect(rejection(withSteps(["retry_once", ...steps]))).toEqual({
      field: `${R}.strategies[1]`,
      message: expect.stringContaining(
        `unknown strategy ${shown} (known: ${STRATEGIES.join(", ")})`,
      ) as string,
    });
  });

  it("names an unknown step field", () => {
    expect(rejection(withSteps([{ strategy: "retry_once", tries: 2 }]))).toEqual({
      field: `${R}.strategies[0].tries`,
      message: expect.stringContaining("unknown step field (known: strategy, attempts)") as string,
    });
  });

  it.each([
    ["0", 0],
    ["-1", -1],
    ["101", 101],
    ["1.5", 1.5],
    ["a string", "2"],
  ])("rejects attempts %s", (_what, attempts) => {
    expect(rejection(withSteps([{ strategy: "retry_once", attempts }]))).toEqual({
      field: `${R}.strategies[0].attempts`,
      message: expect.stringContaining("expected a whole number from 1 to 100") as string,
    });
  });

  it("accepts names, steps without attempts and attempts from 1 to 100, and keeps them in order", () => {
    const steps = [
      "retry_once",
      { strategy: "failover_to_secondary" },
      { strategy: "retry_with_longer_timeout", attempts: 1 },
      { strategy: "exponential_backoff_with_jitter", attempts: 100 },
    ];
    expect(compileRules(withSteps(steps))[0]?.strategies).toEqual(steps);
  });

  it("without a chain, the rule runs its pattern's default chain", () => {
    expect(compileRules([{ ...base, pattern: "AUTH" }])[0]?.strategies).toEqual([
      "failover_to_secondary",
      "escalate_to_human",
    ]);
  });
});
