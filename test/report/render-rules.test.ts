/** `--suggest-rules` as terminal text (renderRuleSuggestions): the table, each rule's evidence, the rest. */
import { describe, expect, it } from "vitest";
import { renderRuleSuggestions } from "../../src/report/render-text.js";
import type { RuleFileRule, RuleSuggestions } from "../../src/report/suggest-rules.js";

const rule = (over: { [K in keyof RuleFileRule]?: RuleFileRule[K] | undefined } = {}) =>
  ({
    name: "budget-spent",
    pattern: "RATE_LIMIT",
    confidence: 0.8,
    match: { status: [429], message: ["request budget spent"] },
    evidence: {
      tier: "structured",
      because: "status 429 in every sample",
      samples: 12,
      firstSeen: "2026-01-01T00:00:00.000Z",
      lastSeen: "2026-01-02T00:00:00.000Z",
      examples: ["Request budget spent\nretry after 30s", "Request budget spent, retry after 5s"],
      tools: ["search", "lookup"],
      strategies: ["exponential_backoff_with_jitter", { strategy: "failover_to_secondary" }],
      recovered: 9,
      recoveredBy: { exponential_backoff_with_jitter: 7, failover_to_secondary: 2 },
    },
    ...over,
  }) as RuleFileRule;

const suggestions = (over: Partial<RuleSuggestions> = {}): RuleSuggestions => ({
  file: { version: 1, source: "selfheal report", rules: [rule()] },
  unclassified: [],
  texts: 20,
  leftOut: 0,
  ...over,
});

describe("renderRuleSuggestions", () => {
  it("a table of the rules, then each one's strategies, recoveries, tools and examples on one line each", () => {
    expect(renderRuleSuggestions(suggestions()).split("\n")).toEqual([
      "Suggested rules: 1 from 20 UNKNOWN texts",
      "rule          pattern     evidence                                samples  first seen                last seen                 match",
      "------------  ----------  --------------------------------------  -------  ------------------------  ------------------------  --------------------------------------",
      "budget-spent  RATE_LIMIT  structured: status 429 in every sample  12       2026-01-01T00:00:00.000Z  2026-01-02T00:00:00.000Z  status 429 and /request budget spent/i",
      "",
      "  budget-spent: runs exponential_backoff_with_jitter -> failover_to_secondary; 9 of 12 recovered (exponential_backoff_with_jitter 7, failover_to_secondary 2); tools search, lookup",
      "    - Request budget spent\\nretry after 30s",
      "    - Request budget spent, retry after 5s",
    ]);
  });

  it("a code match, several wordings, no strategy, nothing recovered; texts past the limit said", () => {
    const text = renderRuleSuggestions(
      suggestions({
        leftOut: 3,
        file: {
          version: 1,
          source: "s",
          rules: [
            rule({
              name: "shard",
              pattern: "SERVICE_DOWN",
              match: { code: ["shard_moving", "rebalance"], message: ["shard", "rebalanc"] },
              evidence: {
                ...(rule().evidence as NonNullable<RuleFileRule["evidence"]>),
                tier: "wording",
                because: "the wording names it",
                strategies: [],
                recovered: 0,
                recoveredBy: {},
                examples: [],
                tools: ["fetch"],
              },
            }),
          ],
        },
      }),
    );
    const lines = text.split("\n");
    expect(lines[0]).toBe(
      "Suggested rules: 1 from 20 UNKNOWN texts (3 past the template limit, not grouped)",
    );
    expect(lines[3]).toMatch(/^shard +SERVICE_DOWN +wording: the wording names it /);
    expect(lines[3]).toMatch(/ code shard_moving\|rebalance and \/shard\/i and \/rebalanc\/i$/);
    expect(lines.slice(4)).toEqual([
      "",
      "  shard: runs no strategy (passed on); 0 of 12 recovered; tools fetch",
    ]);
  });

  it("a rule without evidence is a table row only; templates with no pattern are listed to read", () => {
    const text = renderRuleSuggestions(
      suggestions({
        file: { version: 1, source: "s", rules: [rule({ evidence: undefined })] },
        unclassified: [
          { template: "flux <*> misaligned\u001b[2J", samples: 4, examples: [] },
          { template: "warming up <*>", samples: 1, examples: [] },
        ],
      }),
    );
    const lines = text.split("\n");
    // The evidence columns are blank.
    expect(lines[3]).toMatch(
      /^budget-spent {2}RATE_LIMIT {2}: {2,}status 429 and \/request budget spent\/i$/,
    );
    expect(lines.slice(4)).toEqual([
      "",
      "Templates with no pattern to propose (read them; write a rule by hand):",
      "  - flux <*> misaligned\\x1b[2J (x4)",
      "  - warming up <*> (x1)",
    ]);
  });

  it("no rules: the count alone, then any templates", () => {
    expect(
      renderRuleSuggestions(
        suggestions({ file: { version: 1, source: "s", rules: [] }, texts: 0 }),
      ),
    ).toBe("Suggested rules: 0 from 0 UNKNOWN texts");
  });
});
