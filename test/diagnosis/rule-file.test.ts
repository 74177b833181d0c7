/**
 * Rule files (src/diagnosis/rule-file.ts) and `diagnosis.ruleFile`: a file's rules diagnose what
 * the table does not know, after the table; every bad file or value is a config error at
 * construction naming the field and the problem in one sentence.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseRuleFile, readRuleFile } from "../../src/diagnosis/rule-file.js";
import { compileRules, type Rule } from "../../src/diagnosis/rules.js";
import {
  createSelfHealing,
  SelfHealConfigError,
  type SelfHealing,
  type SelfHealingOptions,
} from "../../src/index.js";
import { configError } from "../helpers/engine.js";

const FIELD = "diagnosis.ruleFile";
const MIB = 1024 * 1024;
const SHAPE =
  'expected { "version": 1, "rules": [...] } (as selfheal report --suggest-rules writes)';
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The whole message of a rule file's config error: `problem` (text as is, or a RegExp). */
const said = (problem: string | RegExp) =>
  new RegExp(
    `^${escape(`selfheal: invalid option \`${FIELD}\`: `)}${
      typeof problem === "string" ? `${escape(problem)}$` : problem.source
    }`,
  );

let dir = "";
const instances: SelfHealing[] = [];
/** Writers waiting on a FIFO of the test (killed after it). */
const writers: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "selfheal-rule-file-"));
});

afterEach(async () => {
  for (const writer of writers.splice(0)) writer.kill();
  await Promise.all(instances.splice(0).map((sh) => sh.close()));
  rmSync(dir, { recursive: true, force: true });
});

/** Writes `content` (a value as JSON, or text as it is) to `name` in the test's folder. */
function put(name: string, content: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

/** A rule file's JSON holding `rules`. */
const fileOf = (...rules: unknown[]) => ({ version: 1, source: "test", rules });

/** A rule as `--suggest-rules` writes it, evidence included. */
const rule = (over: Record<string, unknown> = {}) => ({
  name: "budget-spent",
  pattern: "RATE_LIMIT",
  confidence: 0.6,
  match: { message: ["request budget spent"] },
  evidence: { tier: "wording", because: 'wording "budget"', samples: 3 },
  ...over,
});

/** An instance on `diagnosis` options, closed after the test. */
function instance(diagnosis: NonNullable<SelfHealingOptions["diagnosis"]>): SelfHealing {
  const sh = createSelfHealing({
    agent: "a",
    logger: { warn: () => undefined },
    diagnosis,
  });
  instances.push(sh);
  return sh;
}

/** An error with `message` and, optionally, an HTTP status. */
const failure = (message: string, status?: number) =>
  Object.assign(new Error(message), status === undefined ? {} : { status });

/** The config error creating an instance with `diagnosis` throws. */
const refusal = (diagnosis: unknown) =>
  configError(() => instance(diagnosis as NonNullable<SelfHealingOptions["diagnosis"]>));

describe("parseRuleFile: the rules of a file's text", () => {
  it("compiles message strings case-insensitively, leaves evidence out, keeps every other field", () => {
    const rules = parseRuleFile(
      JSON.stringify(
        fileOf(
          rule({ strategies: ["retry_once"], cooldownMs: 100 }),
          rule({
            name: "two",
            match: [{ status: [418], message: ["teapot", "kettle"] }, { code: ["brewing"] }],
          }),
        ),
      ),
      "f.json",
    );
    expect(rules).toEqual([
      {
        name: "budget-spent",
        pattern: "RATE_LIMIT",
        confidence: 0.6,
        match: { message: [/request budget spent/i] },
        strategies: ["retry_once"],
        cooldownMs: 100,
      },
      {
        name: "two",
        pattern: "RATE_LIMIT",
        confidence: 0.6,
        match: [{ status: [418], message: [/teapot/i, /kettle/i] }, { code: ["brewing"] }],
      },
    ]);
    const [first] = rules;
    const [re] = (first?.match as { message: RegExp[] }).message;
    expect(re?.flags).toBe("i");
    expect(re?.test("REQUEST BUDGET SPENT for this minute")).toBe(true);
    // What it returns is a table compileRules takes as it is.
    expect(compileRules(rules).map((r) => r.name)).toEqual(["budget-spent", "two"]);
  });

  it("an empty list of rules is a valid file", () => {
    expect(parseRuleFile('{ "version": 1, "rules": [] }', "f.json")).toEqual([]);
  });

  it("what is not a rule or a matcher object is passed on for compileRules to name", () => {
    const rules = parseRuleFile(JSON.stringify(fileOf(7, rule({ match: ["x", null] }))), "f.json");
    expect(rules).toEqual([7, dropEvidence(rule({ match: ["x", null] }))]);
    expect(() => compileRules(rules)).toThrow(/diagnosis\.rules\[0\]/);
  });

  it.each([
    ["not JSON", "{ version: 1", /f\.json: not JSON \(.+\)$/],
    ["an empty text", "", /f\.json: not JSON \(.+\)$/],
    ["a list", "[]", `f.json: ${SHAPE}`],
    ["null", "null", `f.json: ${SHAPE}`],
    ["no version", '{ "rules": [] }', `f.json: ${SHAPE}`],
    ["version 2", '{ "version": 2, "rules": [] }', `f.json: ${SHAPE}`],
    ['version "1"', '{ "version": "1", "rules": [] }', `f.json: ${SHAPE}`],
    ["rules not a list", '{ "version": 1, "rules": {} }', `f.json: ${SHAPE}`],
    ["no rules", '{ "version": 1 }', `f.json: ${SHAPE}`],
    [
      "a message that is not a list",
      JSON.stringify(fileOf(rule({ match: { message: "quota" } }))),
      "f.json: rules[0].match.message: expected a list of regex strings",
    ],
    [
      "a message list holding a RegExp-like object",
      JSON.stringify(fileOf(rule(), rule({ match: [{ code: ["x"] }, { message: ["a", {}] }] }))),
      "f.json: rules[1].match[1].message: expected a list of regex strings",
    ],
    [
      "a regex that does not compile",
      JSON.stringify(fileOf(rule({ match: { message: ["ok", "quota (exceeded"] } }))),
      /f\.json: rules\[0\]\.match\.message\[1\]: not a regex \(Invalid regular expression: .*quota \(exceeded.*\)$/,
    ],
  ])("%s: refused, naming the file and the place", (_, text, problem) => {
    const error = configError(() => parseRuleFile(text, "f.json"));
    expect(error).toBeInstanceOf(SelfHealConfigError);
    expect(error.field).toBe(FIELD);
    expect(error.message).toMatch(said(problem));
  });
});

/** A parsed rule compared without its (removed) evidence key. */
function dropEvidence(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const rest = { ...(value as Record<string, unknown>) };
  delete rest.evidence;
  return rest;
}

/** A new entry `name` of the test's folder, made by `make`, its path. */
const made = (name: string, make: (path: string) => unknown) => () => {
  const path = join(dir, name);
  make(path);
  return path;
};

/**
 * Makes a FIFO at `path` with a writer waiting to give it a short text: a reader that opened it
 * would get the text and its end (a config error, not the one expected) instead of blocking.
 */
function fifo(path: string): void {
  execFileSync("mkfifo", [path]);
  writers.push(spawn("sh", ["-c", 'printf "not json" > "$1"', "sh", path], { stdio: "ignore" }));
}

/**
 * Files that are no rule file, with the problem named (after the path): what readRuleFile and
 * createSelfHealing refuse alike.
 */
const BAD_FILES: [string, () => string, (path: string) => string | RegExp][] = [
  ["a missing file", () => join(dir, "missing.json"), (p) => `cannot read ${p} (ENOENT)`],
  [
    "a path under a file",
    () => join(put("plain.json", "{}"), "rules.json"),
    (p) => `cannot read ${p} (ENOTDIR)`,
  ],
  [
    "a folder",
    made("rules.d", (p) => {
      mkdirSync(p);
    }),
    (p) => `${p}: a directory, not a regular file`,
  ],
  [
    "a FIFO (refused without opening it: a read would block)",
    made("rules.fifo", fifo),
    (p) => `${p}: a named pipe, not a regular file`,
  ],
  [
    "a file over 1 MiB",
    () => put("big.json", " ".repeat(MIB + 1)),
    (p) => `${p}: larger than ${MIB} bytes`,
  ],
  [
    "not JSON",
    () => put("bad.json", "rules: []"),
    (p) => new RegExp(`${escape(p)}: not JSON \\(.+\\)$`),
  ],
  ["a wrong version", () => put("v2.json", { version: 2, rules: [] }), (p) => `${p}: ${SHAPE}`],
  [
    "rules not a list",
    () => put("obj.json", { version: 1, rules: { a: 1 } }),
    (p) => `${p}: ${SHAPE}`,
  ],
  [
    "a message not a list of strings",
    () => put("rules.json", fileOf(rule({ match: { message: [1] } }))),
    (p) => `${p}: rules[0].match.message: expected a list of regex strings`,
  ],
  [
    "a regex that does not compile",
    () => put("rules.json", fileOf(rule({ match: { message: ["[unclosed"] } }))),
    (p) =>
      new RegExp(
        `${escape(p)}: rules\\[0\\]\\.match\\.message\\[0\\]: not a regex \\(Invalid regular expression: .+\\)$`,
      ),
  ],
];

describe("readRuleFile: a regular file of sane size, read once", () => {
  it("reads the rules of a file", () => {
    const file = put("rules.json", fileOf(rule()));
    expect(readRuleFile(file)).toEqual([
      dropEvidence(rule({ match: { message: [/request budget spent/i] } })),
    ]);
  });

  it("a file of exactly 1 MiB is read; one byte more is refused before reading", () => {
    const body = JSON.stringify(fileOf(rule()));
    const exact = put("exact.json", body + " ".repeat(MIB - body.length));
    expect(readRuleFile(exact)).toHaveLength(1);
    const over = put("over.json", body + " ".repeat(MIB - body.length + 1));
    const error = configError(() => readRuleFile(over));
    expect(error.field).toBe(FIELD);
    expect(error.message).toContain(`${over}: larger than ${MIB} bytes`);
  });

  it.each(BAD_FILES)("%s: a config error naming the path and the problem", (_, make, problem) => {
    const path = make();
    const error = configError(() => readRuleFile(path));
    expect(error).toBeInstanceOf(SelfHealConfigError);
    expect(error.field).toBe(FIELD);
    expect(error.message).toMatch(said(problem(path)));
  });
});

describe("diagnosis.ruleFile: the file's rules diagnose the errors the table does not know", () => {
  it("a rule of the file names the pattern and itself on the diagnosis; its regex ignores case", async () => {
    const ruleFile = put("rules.json", fileOf(rule()));
    const sh = instance({ ruleFile });
    for (const text of ["Request budget spent for this minute", "REQUEST BUDGET SPENT, slow down"])
      expect(await sh.diagnose(failure(text), { tool: "t" })).toMatchObject({
        pattern: "RATE_LIMIT",
        rule: "budget-spent",
        confidence: 0.6,
        evidence: "wording",
        actionable: true,
      });
    // Without the file the same error is UNKNOWN.
    const plain = instance({});
    expect(
      await plain.diagnose(failure("Request budget spent for this minute"), { tool: "t" }),
    ).toMatchObject({ pattern: "UNKNOWN", rule: "none" });
  });

  it("a rule with a status is structured evidence, and needs the status", async () => {
    const ruleFile = put(
      "rules.json",
      fileOf(
        rule({
          name: "teapot",
          pattern: "SERVICE_DOWN",
          confidence: 0.8,
          match: { status: [418], message: ["brewing"] },
        }),
      ),
    );
    const sh = instance({ ruleFile });
    expect(await sh.diagnose(failure("still brewing", 418), { tool: "t" })).toMatchObject({
      pattern: "SERVICE_DOWN",
      rule: "teapot",
      evidence: "structured",
      status: 418,
    });
    expect(await sh.diagnose(failure("still brewing"), { tool: "t" })).toMatchObject({
      pattern: "UNKNOWN",
    });
  });

  it("the file's rules go after the table: a default rule still wins for the errors it knows", async () => {
    const ruleFile = put(
      "rules.json",
      fileOf(
        rule({
          name: "any-429",
          pattern: "SERVICE_DOWN",
          confidence: 0.8,
          match: { status: [429] },
        }),
        rule({ name: "any-text", pattern: "AUTH", confidence: 0.6, match: { message: ["."] } }),
      ),
    );
    const sh = instance({ ruleFile });
    expect(await sh.diagnose(failure("slow down", 429), { tool: "t" })).toMatchObject({
      pattern: "RATE_LIMIT",
      rule: "http-429",
    });
    expect(await sh.diagnose(failure("request timed out"), { tool: "t" })).toMatchObject({
      pattern: "TIMEOUT",
      rule: "timeout",
    });
    expect(await sh.diagnose(failure("who knows"), { tool: "t" })).toMatchObject({
      pattern: "AUTH",
      rule: "any-text",
    });
  });

  it("after a table given as a list, or made by a function from the defaults", async () => {
    const ruleFile = put(
      "rules.json",
      fileOf(rule({ name: "late", pattern: "TIMEOUT", match: { message: ["odd"] } })),
    );
    const own: Rule = {
      name: "own",
      pattern: "AUTH",
      confidence: 0.9,
      match: { message: [/odd one/] },
    };
    const tables = [[own], (defaults: readonly Rule[]) => [own, ...defaults]];
    for (const rules of tables) {
      const sh = instance({ rules, ruleFile });
      expect(await sh.diagnose(failure("an odd one"), { tool: "t" })).toMatchObject({
        rule: "own",
      });
      expect(await sh.diagnose(failure("odd"), { tool: "t" })).toMatchObject({ rule: "late" });
    }
  });

  it("a list of files: the rules of each, in the order given", async () => {
    const first = put(
      "first.json",
      fileOf(
        rule({ name: "first", pattern: "TIMEOUT", match: { message: ["shared", "only-first"] } }),
      ),
    );
    const second = put(
      "second.json",
      fileOf(
        rule({ name: "second", pattern: "AUTH", match: { message: ["shared", "only-second"] } }),
      ),
    );
    const sh = instance({ ruleFile: [first, second] });
    const rule0 = async (text: string) => (await sh.diagnose(failure(text), { tool: "t" })).rule;
    expect(await rule0("only-first")).toBe("first");
    expect(await rule0("only-second")).toBe("second");
    expect(await rule0("shared")).toBe("first");
    const reversed = instance({ ruleFile: [second, first] });
    expect((await reversed.diagnose(failure("shared"), { tool: "t" })).rule).toBe("second");
  });

  it("an empty list of files is no file", async () => {
    const sh = instance({ ruleFile: [] });
    expect(await sh.diagnose(failure("who knows"), { tool: "t" })).toMatchObject({
      pattern: "UNKNOWN",
    });
  });
});

describe("diagnosis.ruleFile: every bad input is a config error at construction", () => {
  /** A rule file holding `rules`, its path. */
  const ruleFileOf = (...rules: unknown[]) => put("rules.json", fileOf(...rules));

  it.each([
    ["a number", 42, "expected a path or a list of paths, got 42"],
    ["null", null, "expected a path or a list of paths, got null"],
    ["an empty path", "", 'expected a path or a list of paths, got ""'],
    ["a list with an empty path", [""], 'expected a path or a list of paths, got [""]'],
    ["a list with a number", [1], "expected a path or a list of paths, got [1]"],
    ["an object", { path: "x" }, "expected a path or a list of paths"],
  ])("ruleFile %s", (_, ruleFile, problem) => {
    const error = refusal({ ruleFile });
    expect(error.field).toBe(FIELD);
    expect(error.message).toContain(`selfheal: invalid option \`${FIELD}\`: ${problem}`);
  });

  it.each(BAD_FILES)(
    "%s: field diagnosis.ruleFile, the path and the problem",
    (_, make, problem) => {
      const ruleFile = make();
      const error = refusal({ ruleFile });
      expect(error).toBeInstanceOf(SelfHealConfigError);
      expect(error.field).toBe(FIELD);
      expect(error.message).toMatch(said(problem(ruleFile)));
    },
  );

  it("one bad file in a list refuses the whole list", () => {
    const good = ruleFileOf(rule());
    const missing = join(dir, "missing.json");
    const error = refusal({ ruleFile: [good, missing] });
    expect(error.field).toBe(FIELD);
    expect(error.message).toContain(`cannot read ${missing} (ENOENT)`);
  });

  it.each([
    [
      "a regex the linear engine cannot run",
      rule({ match: { message: ["(\\w+) \\1"] } }),
      'diagnosis.rules["budget-spent"].match.message[0]',
      "a backreference (\\1) is not supported: selfheal matches your rules with a linear-time engine",
    ],
    [
      "an unknown pattern",
      rule({ pattern: "QUOTA" }),
      'diagnosis.rules["budget-spent"].pattern',
      'unknown pattern "QUOTA" (known: RATE_LIMIT,',
    ],
    [
      "a confidence out of range",
      rule({ confidence: 2 }),
      'diagnosis.rules["budget-spent"].confidence',
      "expected a number from 0 to 1",
    ],
    [
      "an unknown rule field",
      rule({ why: "because" }),
      'diagnosis.rules["budget-spent"].why',
      "unknown rule field",
    ],
    [
      "an unknown matcher field",
      rule({ match: { message: ["x"], body: ["y"] } }),
      'diagnosis.rules["budget-spent"].match.body',
      "unknown matcher field",
    ],
  ])(
    "%s: refused by the rule validator, naming the file and the rule",
    (_, bad, field, problem) => {
      const path = ruleFileOf(bad);
      const error = refusal({ ruleFile: path });
      expect(error).toBeInstanceOf(SelfHealConfigError);
      expect(error.field).toBe(FIELD);
      expect(error.message).toContain(`${path}: \`${field}\`: ${problem}`);
    },
  );

  it("a rule named as one of the table's: refused with the whole table", () => {
    const error = refusal({ ruleFile: ruleFileOf(rule({ name: "http-429" })) });
    expect(error.field).toBe('diagnosis.rules["http-429"]');
    expect(error.message).toContain("two rules have this name");
  });

  it("two files with a rule of the same name", () => {
    const a = put("a.json", fileOf(rule()));
    const b = put("b.json", fileOf(rule()));
    const error = refusal({ ruleFile: [a, b] });
    expect(error.field).toBe('diagnosis.rules["budget-spent"]');
    expect(error.message).toContain("two rules have this name");
  });
});
