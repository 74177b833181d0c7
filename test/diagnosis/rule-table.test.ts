import { describe, expect, it } from "vitest";
import { DEFAULT_RULES, type Matcher } from "../../src/diagnosis/rules.js";
import { virtualInstance } from "../helpers/engine.js";

const { sh } = virtualInstance();

/**
 * An error that matches one matcher with one value of `field` (each other field at its first
 * value): the smallest error each entry of the default table is there for.
 */
function errorFor(m: Matcher, field: "status" | "code" | "name", value: number | string) {
  const error = new Error("selfheal rule-table probe") as Error & Record<string, unknown>;
  const status = field === "status" ? value : m.status?.[0];
  const code = field === "code" ? value : m.code?.[0];
  const name = field === "name" ? value : m.name?.[0];
  if (status !== undefined) error.status = status;
  if (code !== undefined) error.code = code;
  if (name !== undefined) error.name = String(name);
  if (m.header) error.headers = Object.fromEntries(m.header.map((h) => [h, "1"]));
  return error;
}

/** Every status, code and class name of every matcher that needs no wording or status page. */
const cases = DEFAULT_RULES.flatMap((rule) =>
  (Array.isArray(rule.match) ? rule.match : [rule.match]).flatMap((m: Matcher) =>
    m.message || m.statusPageDegraded
      ? []
      : (["status", "code", "name"] as const).flatMap((field) =>
          (m[field] ?? []).map((value: number | string) => ({
            rule: rule.name,
            pattern: rule.pattern,
            field,
            value,
            error: errorFor(m, field, value),
          })),
        ),
  ),
);

describe("the default rule table, entry by entry", () => {
  it("has entries to check", () => {
    expect(cases.length).toBeGreaterThan(60);
  });

  it.each(cases.map((c) => [`${c.rule}: ${c.field} ${String(c.value)}`, c] as const))(
    "%s",
    async (_, c) => {
      // No entry is shadowed by an earlier rule: each one decides its own errors.
      expect(await sh.diagnose(c.error, { tool: "t" })).toMatchObject({
        rule: c.rule,
        pattern: c.pattern,
        evidence: "structured",
      });
    },
  );
});
