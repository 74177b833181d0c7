/**
 * RuleSuggester (src/report/suggest-rules.ts): UNKNOWN texts grouped into templates, each
 * proposed as a rule named by the status, code or wording its samples share, with its evidence;
 * the rule file it writes is one createSelfHealing loads, and each regex matches its examples.
 */
import { describe, expect, it } from "vitest";
import { parseRuleFile } from "../../src/diagnosis/rule-file.js";
import { compileRules, DEFAULT_CHAINS } from "../../src/diagnosis/rules.js";
import {
  RuleSuggester,
  type RuleFileRule,
  type RuleSuggestions,
  type UnknownSample,
} from "../../src/report/suggest-rules.js";

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;

/** A failed UNKNOWN sample of tool `lookup` at T0, with fields replaced. */
const sample = (error: string, over: Partial<UnknownSample> = {}): UnknownSample => ({
  at: T0,
  tool: "lookup",
  error,
  outcome: "failed",
  ...over,
});

/** The suggestions for `samples`, added in order. */
function suggest(...samples: UnknownSample[]): RuleSuggestions {
  const s = new RuleSuggester();
  for (const x of samples) s.add(x);
  return s.suggest("test");
}

/** The only rule proposed for `samples` (fails the test when there is not exactly one). */
function only(...samples: UnknownSample[]): RuleFileRule {
  const { rules } = suggest(...samples).file;
  expect(rules).toHaveLength(1);
  return rules[0] as RuleFileRule;
}

/** Wording that names no pattern: what a status or code alone has to name. */
const PLAIN = "gizmo went sideways";
const PLAIN_REGEX = "gizmo[)\\]}>,;:.!?]*\\s+[([{<]*went[)\\]}>,;:.!?]*\\s+[([{<]*sideways";

describe("a status every sample shares names the pattern (structured, 0.8)", () => {
  it.each([
    [429, "RATE_LIMIT"],
    [408, "TIMEOUT"],
    [504, "SERVICE_DOWN"], // the gateway's: as the default rules read it
    [401, "AUTH"],
    [403, "AUTH"],
    [413, "CONTEXT_LENGTH"],
    [400, "BAD_REQUEST"],
    [404, "BAD_REQUEST"],
    [422, "BAD_REQUEST"],
    [500, "SERVICE_DOWN"],
    [502, "SERVICE_DOWN"],
    [503, "SERVICE_DOWN"],
    [529, "SERVICE_DOWN"],
    [599, "SERVICE_DOWN"],
  ] as const)("status %i -> %s", (status, pattern) => {
    const rule = only(sample(PLAIN, { status }));
    expect(rule).toMatchObject({
      pattern,
      confidence: 0.8,
      match: { status: [status], message: [PLAIN_REGEX] },
      evidence: { tier: "structured", because: `status ${status}` },
    });
    expect(rule.match.code).toBeUndefined();
  });

  it("the status wins over a code and over wording", () => {
    expect(
      only(sample("request timed out", { status: 401, code: "quota_exceeded" })),
    ).toMatchObject({
      pattern: "AUTH",
      match: {
        status: [401],
        code: ["quota_exceeded"],
        message: ["request[)\\]}>,;:.!?]*\\s+[([{<]*timed[)\\]}>,;:.!?]*\\s+[([{<]*out"],
      },
      evidence: { tier: "structured", because: "status 401" },
    });
  });

  it.each([
    ["an unmapped status (418)", 418],
    ["a redirect (302)", 302],
    ["a status past 599", 600],
  ])("%s names nothing: the wording decides, the status is still matched", (_, status) => {
    expect(only(sample("Too many requests, brewing", { status }))).toMatchObject({
      pattern: "RATE_LIMIT",
      confidence: 0.6,
      match: {
        status: [status],
        message: [
          "Too[)\\]}>,;:.!?]*\\s+[([{<]*many[)\\]}>,;:.!?]*\\s+[([{<]*requests[)\\]}>,;:.!?]*\\s+[([{<]*brewing",
        ],
      },
      evidence: { tier: "wording", because: 'wording "Too many requests"' },
    });
  });

  it("an unmapped status with wording that names nothing: no rule, the template listed", () => {
    const s = suggest(sample("I'm a teapot", { status: 418 }));
    expect(s.file.rules).toEqual([]);
    expect(s.unclassified).toEqual([
      { template: "I'm a teapot", samples: 1, examples: ["I'm a teapot"] },
    ]);
  });
});

describe("a code every sample shares names the pattern by its own wording (structured, 0.8)", () => {
  it.each([
    ["quota_exceeded", "RATE_LIMIT"],
    ["ThrottledRequest", "RATE_LIMIT"],
    ["context_length_exceeded", "CONTEXT_LENGTH"],
    ["request-timeout", "TIMEOUT"],
    ["invalid_api_key", "AUTH"],
    ["moderation_blocked", "CONTENT_POLICY"],
    ["json_decode_error", "JSON_PARSE_ERROR"],
    ["empty_response", "EMPTY_LLM_RESPONSE"],
    ["bad_request", "BAD_REQUEST"],
    ["service_unavailable", "SERVICE_DOWN"],
  ] as const)("code %s -> %s", (code, pattern) => {
    expect(only(sample(PLAIN, { code }))).toMatchObject({
      pattern,
      confidence: 0.8,
      match: { code: [code], message: [PLAIN_REGEX] },
      evidence: { tier: "structured", because: `code ${code}` },
    });
  });

  it("the code wins over wording; an unmapped status gives way to it", () => {
    expect(only(sample("request timed out", { status: 418, code: "rate_limited" }))).toMatchObject({
      pattern: "RATE_LIMIT",
      match: { status: [418], code: ["rate_limited"] },
      evidence: { tier: "structured", because: "code rate_limited" },
    });
  });

  it("a code that names nothing: the wording decides, the code is still matched", () => {
    expect(only(sample("upstream deadline passed", { code: "E_GIZMO_42" }))).toMatchObject({
      pattern: "TIMEOUT",
      confidence: 0.6,
      match: {
        code: ["E_GIZMO_42"],
        message: ["upstream[)\\]}>,;:.!?]*\\s+[([{<]*deadline[)\\]}>,;:.!?]*\\s+[([{<]*passed"],
      },
      evidence: { tier: "wording", because: 'wording "deadline"' },
    });
  });
});

describe("wording names the pattern when no status or code does (wording, 0.6)", () => {
  it.each([
    ["prompt too long for this model", "CONTEXT_LENGTH", "too long"],
    ["Request budget spent, slow down", "RATE_LIMIT", "budget"],
    ["upstream deadline passed", "TIMEOUT", "deadline"],
    ["caller forbidden here", "AUTH", "forbidden"],
    ["answer flagged by moderation", "CONTENT_POLICY", "flagged"],
    ["could not parse the answer", "JSON_PARSE_ERROR", "could not parse"],
    ["model gave an empty completion", "EMPTY_LLM_RESPONSE", "empty completion"],
    ["missing required field prompt", "BAD_REQUEST", "missing required"],
    ["backend under maintenance", "SERVICE_DOWN", "maintenance"],
  ] as const)("%j -> %s", (text, pattern, found) => {
    expect(only(sample(text))).toMatchObject({
      pattern,
      confidence: 0.6,
      evidence: { tier: "wording", because: `wording "${found}"` },
    });
    expect(only(sample(text)).match).toEqual({ message: [expect.any(String)] });
  });

  it.each([
    ["context window quota reached", "CONTEXT_LENGTH"],
    ["quota timeout", "RATE_LIMIT"],
    ["invalid api key", "AUTH"],
    ["invalid json body", "JSON_PARSE_ERROR"],
  ] as const)("the first row that matches wins: %j -> %s", (text, pattern) => {
    expect(only(sample(text)).pattern).toBe(pattern);
  });

  it("only the template's fixed words count: a masked value names nothing", () => {
    // `"timeout"` is a quoted value, masked: the wording left is "refused".
    expect(only(sample('value "timeout" refused'))).toMatchObject({
      pattern: "SERVICE_DOWN",
      evidence: { because: 'wording "refused"' },
      match: { message: ["value[)\\]}>,;:.!?]*\\s+\\S+\\s+[([{<]*refused"] },
    });
  });
});

describe("status and code are kept only when every sample of the template shares them", () => {
  const budget = (n: number) => `Request budget spent, retry in ${n}s`;
  it.each([
    ["all 429", [429, 429, 429], [429]],
    ["429 then 503", [429, 503], undefined],
    ["429 then none", [429, undefined], undefined],
    ["none then 429", [undefined, 429], undefined],
  ] as const)("statuses %s", (_, statuses, kept) => {
    const rule = only(...statuses.map((status, i) => sample(budget(i + 1), { status })));
    expect(rule.match.status).toEqual(kept);
    expect(rule.evidence?.tier).toBe(kept ? "structured" : "wording");
    expect(rule.confidence).toBe(kept ? 0.8 : 0.6);
    expect(rule.pattern).toBe("RATE_LIMIT");
  });

  it.each([
    ["all the same", ["quota_exceeded", "quota_exceeded"], ["quota_exceeded"]],
    ["two codes", ["quota_exceeded", "rate_limited"], undefined],
    ["one missing", ["quota_exceeded", undefined], undefined],
  ] as const)("codes %s", (_, codes, kept) => {
    const rule = only(...codes.map((code, i) => sample(budget(i + 1), { code })));
    expect(rule.match.code).toEqual(kept);
    expect(rule.evidence?.because).toBe(kept ? "code quota_exceeded" : 'wording "budget"');
  });
});

describe("names, order and what is left to a person", () => {
  it("the most frequent template first; names suggested-<pattern>-<n>, numbered per pattern", () => {
    const s = suggest(
      sample("upstream deadline passed"),
      sample("quota gone for project 1"),
      sample("quota gone for project 2"),
      sample("quota gone for project 3"),
      sample("slow down please"),
      sample("slow down please"),
      sample("prompt too long here"),
      sample("backend under maintenance"),
      sample("model gave an empty reply"),
    );
    expect(s.file.rules.map((r) => [r.name, r.pattern, r.evidence?.samples])).toEqual([
      ["suggested-rate-limit-1", "RATE_LIMIT", 3],
      ["suggested-rate-limit-2", "RATE_LIMIT", 2],
      ["suggested-timeout-1", "TIMEOUT", 1],
      ["suggested-context-length-1", "CONTEXT_LENGTH", 1],
      ["suggested-service-down-1", "SERVICE_DOWN", 1],
      ["suggested-empty-llm-response-1", "EMPTY_LLM_RESPONSE", 1],
    ]);
    expect(s.texts).toBe(9);
    expect(s.leftOut).toBe(0);
    expect(s.unclassified).toEqual([]);
  });

  it("templates nothing names are listed with their samples and examples, no rule", () => {
    const s = suggest(
      sample("the sky is green 7"),
      sample("the sky is green 8"),
      sample("weird thing happened"),
      sample("Request budget spent"),
    );
    expect(s.file.rules.map((r) => r.name)).toEqual(["suggested-rate-limit-1"]);
    expect(s.unclassified).toEqual([
      {
        template: "the sky is green <*>",
        samples: 2,
        examples: ["the sky is green 7", "the sky is green 8"],
      },
      { template: "weird thing happened", samples: 1, examples: ["weird thing happened"] },
    ]);
  });

  it("a template of masked words only has nothing to match: listed, even with a status", () => {
    const s = suggest(sample("429", { status: 429 }), sample("(503)", { status: 429 }));
    expect(s.file.rules).toEqual([]);
    expect(s.unclassified).toEqual([{ template: "<*>", samples: 2, examples: ["429", "(503)"] }]);
  });

  it("nothing added: an empty file", () => {
    expect(suggest()).toEqual({
      file: { version: 1, source: "test", rules: [] },
      unclassified: [],
      texts: 0,
      leftOut: 0,
    });
  });
});

describe("the evidence of a proposal", () => {
  it("samples, first and last seen, the first 3 distinct examples, the chain", () => {
    const texts = [5, 2, 9, 5, 7, 1].map((n) => `Request budget spent, retry in ${n}s`);
    const ats = [3, 1, 4, 1, 5, 2].map((m) => T0 + m * MINUTE);
    const rule = only(...texts.map((t, i) => sample(t, { at: ats[i] ?? 0 })));
    expect(rule.evidence).toMatchObject({
      samples: 6,
      firstSeen: new Date(T0 + MINUTE).toISOString(),
      lastSeen: new Date(T0 + 5 * MINUTE).toISOString(),
      examples: texts.slice(0, 3),
      strategies: DEFAULT_CHAINS.RATE_LIMIT,
    });
  });

  it("the tools, sorted (at most 10); recovered, and recoveredBy the most frequent first", () => {
    const tools = ["zeta", "alpha", "mid", "alpha", "beta"];
    const outcomes: [string, string | undefined][] = [
      ["recovered", "retry_once"],
      ["recovered", "failover_to_secondary"],
      ["recovered", "failover_to_secondary"],
      ["recovered", "exponential_backoff_with_jitter"],
      ["recovered", undefined],
      ["failed", "retry_once"],
      ["escalated", undefined],
    ];
    const rule = only(
      ...outcomes.map(([outcome, strategy], i) =>
        sample(`slow down, attempt ${i}`, {
          tool: tools[i % tools.length] ?? "x",
          outcome,
          strategy,
        }),
      ),
    );
    expect(rule.evidence).toMatchObject({
      samples: 7,
      tools: ["alpha", "beta", "mid", "zeta"],
      recovered: 5,
    });
    // Ties in the order of the strategy's name.
    expect(Object.entries(rule.evidence?.recoveredBy ?? {})).toEqual([
      ["failover_to_secondary", 2],
      ["exponential_backoff_with_jitter", 1],
      ["retry_once", 1],
    ]);
  });

  it("no recovery: recovered 0, recoveredBy empty", () => {
    expect(only(sample("slow down")).evidence).toMatchObject({ recovered: 0, recoveredBy: {} });
  });

  it("the tools named are the first 10 seen, sorted", () => {
    const names = Array.from({ length: 12 }, (_, i) => `tool-${String(11 - i).padStart(2, "0")}`);
    const rule = only(...names.map((tool) => sample("slow down", { tool })));
    expect(rule.evidence?.tools).toEqual(names.slice(0, 10).sort());
  });

  it("the source given is written into the file", () => {
    const s = new RuleSuggester();
    s.add(sample("slow down"));
    expect(s.suggest("selfheal report: a to b").file).toMatchObject({
      version: 1,
      source: "selfheal report: a to b",
    });
  });
});

describe("every proposed rule file loads, and each regex matches its own examples", () => {
  /** Texts of every kind the miner masks, with regex metacharacters among the fixed words. */
  const corpus: UnknownSample[] = [
    ...[1, 2, 3].map((i) =>
      sample(`Quota (a+)+ exceeded [tier] {x} ^y$ a|b back\\slash / req_8f3a9c2b1d${i}0`, {
        status: 429,
        tool: "search",
      }),
    ),
    sample('model "gpt-9" too long: 12000 tokens', { code: "too_long" }),
    sample('model "claude" too long: 9000 tokens', { code: "too_long" }),
    sample("GET https://api.example.com/v1/x timed out after 30s"),
    sample("GET https://api.example.com/v1/y timed out after 45s"),
    sample("connect to 10.0.0.12:8080 refused (ECONNREFUSED)", { status: 502 }),
    sample("key [REDACTED_KEY] not allowed for project 3f2b8c1e-9a7d-4c2b-8e1f-0a1b2c3d4e5f"),
    sample("« Quota » atteint… réessayez plus tard"),
    sample("answer was flagged, see https://policy.example.com"),
    sample("Unexpected token < in JSON at position 0"),
    sample("upstream  is\tbusy , try again later!"),
    sample("slow down... ... please"),
    sample("the sky is green 7"),
  ];
  // Proposed in each test, not once at collection: Stryker's per-test coverage credits only the
  // tests that run the code (the rule names alone are read at collection, for the test titles).
  const propose = () => suggest(...corpus);

  it("proposes a rule for every template a pattern names", () => {
    const s = propose();
    expect(s.file.rules.length).toBeGreaterThanOrEqual(10);
    expect(s.unclassified.map((u) => u.template)).toEqual(["the sky is green <*>"]);
  });

  it("parseRuleFile then compileRules accept the file as written (JSON, evidence included)", () => {
    const s = propose();
    const rules = parseRuleFile(JSON.stringify(s.file, null, 2), "suggested.json");
    const compiled = compileRules(rules);
    expect(compiled.map((r) => r.name)).toEqual(s.file.rules.map((r) => r.name));
    for (const [i, r] of compiled.entries()) {
      const proposed = s.file.rules[i] as RuleFileRule;
      expect(r.pattern).toBe(proposed.pattern);
      expect(r.confidence).toBe(proposed.confidence);
      expect(r.strategies).toEqual(DEFAULT_CHAINS[proposed.pattern]);
      expect(r.matchers[0]?.structured).toBe(proposed.evidence?.tier === "structured");
    }
  });

  it.each(propose().file.rules.map((r) => r.name))(
    "%s: its regex matches each of its examples",
    (name) => {
      const rule = propose().file.rules.find((r) => r.name === name) as RuleFileRule;
      const [source] = rule.match.message;
      const re = new RegExp(source ?? "(?!)", "i");
      expect(rule.evidence?.examples.length).toBeGreaterThan(0);
      for (const example of rule.evidence?.examples ?? []) expect(re.test(example)).toBe(true);
    },
  );
});
