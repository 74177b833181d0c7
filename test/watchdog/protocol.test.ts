/**
 * The watchdog file protocol (docs/watchdog-protocol.md) against its JSON Schemas (schemas/):
 * what the Node writers write matches them, the heartbeat schema and the supervisor's reader
 * accept the same files, and every JSON example in the document matches its schema.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv2020 from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv/dist/2020.js";
import { afterAll, describe, expect, it } from "vitest";
import {
  ackFile,
  inboxFile,
  sendToInbox,
  snapshotFile,
  supervised,
} from "../../src/watchdog/agent.js";
import { heartbeat, heartbeatFile } from "../../src/watchdog/heartbeat.js";
import { MAX_HEARTBEAT_BYTES, MAX_SKEW_MS, readHeartbeat } from "../../src/watchdog/reader.js";

const ROOT = new URL("../../", import.meta.url);
const DOC = new URL("docs/watchdog-protocol.md", ROOT);
const SCHEMAS = [
  "watchdog-heartbeat",
  "watchdog-inbox",
  "watchdog-ack",
  "watchdog-snapshot",
] as const;
type SchemaName = (typeof SCHEMAS)[number];

const schemaOf = (name: SchemaName): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`schemas/${name}.schema.json`, ROOT), "utf8")) as Record<
    string,
    unknown
  >;

// Strict: an unknown keyword or a schema mistake fails the compile, not the validation. `.default`:
// ajv is CommonJS, so under NodeNext the default import is its module object, whose `default` is
// the class (at run time, the class itself also carries `default`).
const ajv = new Ajv2020.default({ strict: true, allErrors: true });
const validators = new Map<string, ValidateFunction>(
  SCHEMAS.map((name) => [name, ajv.compile(schemaOf(name))]),
);
const validator = (name: string): ValidateFunction => {
  const validate = validators.get(name);
  if (!validate) throw new Error(`no schema named ${name}`);
  return validate;
};

/** Asserts that `value` matches schema `name`, showing ajv's errors when it does not. */
function expectValid(name: SchemaName, value: unknown, what: string = name): void {
  const validate = validator(name);
  const ok = validate(value);
  expect(ok, `${what}: ${ajv.errorsText(validate.errors)}`).toBe(true);
}

/** The schema's verdict on a file's text: strict JSON (no BOM, no NaN), then the schema. */
function schemaAccepts(name: SchemaName, text: string): boolean {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return false;
  }
  return validator(name)(value);
}

const root = mkdtempSync(join(tmpdir(), "selfheal-protocol-"));
let n = 0;
const freshDir = () => {
  const dir = join(root, `d${n++}`);
  mkdirSync(dir);
  return dir;
};
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

const readJson = (file: string): unknown => JSON.parse(readFileSync(file, "utf8"));

/** The smallest file each schema accepts. */
const minimal: Record<SchemaName, Record<string, unknown>> = {
  "watchdog-heartbeat": {
    v: 1,
    sessionId: "s",
    pid: 1,
    stage: "planning",
    stepIdx: 0,
    at: 0,
    stepAt: 0,
    startedAt: 0,
  },
  "watchdog-inbox": { messages: [] },
  "watchdog-ack": { seq: 1 },
  "watchdog-snapshot": { v: 1 },
};

describe("the schemas", () => {
  it.each(SCHEMAS)("%s: draft 2020-12, its $id, a title and a description", (name) => {
    const schema = schemaOf(name);
    expect(schema.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(schema.$id).toBe(`https://selfheal.dev/schemas/${name}.schema.json`);
    expect(typeof schema.title).toBe("string");
    expect(typeof schema.description).toBe("string");
    // Forward compatibility: a reader ignores what it does not know.
    expect(schema.additionalProperties).toBe(true);
    expect(validator(name)({ ...minimal[name], aFieldFromTheFuture: [1, 2] })).toBe(true);
  });

  it("ship in the npm package", () => {
    const pkg = JSON.parse(readFileSync(new URL("package.json", ROOT), "utf8")) as {
      files: string[];
    };
    expect(pkg.files).toContain("schemas");
  });
});

describe("what the Node writers write matches the schemas", () => {
  it("heartbeat(), without a generation: each beat, and a keep-alive rewrite", async () => {
    const stateDir = freshDir();
    const writer = heartbeat({ stateDir, sessionId: "plain", minIntervalMs: 0 });
    const file = heartbeatFile(stateDir, "plain");
    await writer.beat({ stage: "planning", stepIdx: 0 });
    const first = readJson(file);
    expectValid("watchdog-heartbeat", first, "first beat");
    expect(first).not.toHaveProperty("gen");
    await writer.beat({
      stage: "tool_call",
      stepIdx: 3,
      contextTokens: 48_000,
      lastTool: "search",
    });
    expectValid("watchdog-heartbeat", readJson(file), "beat with every optional field");
    await writer.refresh(0);
    expectValid("watchdog-heartbeat", readJson(file), "keep-alive");
  });

  it("heartbeat() with a generation carries it as gen", async () => {
    const stateDir = freshDir();
    const writer = heartbeat({ stateDir, sessionId: "gen", minIntervalMs: 0, generation: 3 });
    await writer.beat({ stage: "llm_response", stepIdx: 17, contextTokens: 0 });
    const beat = readJson(heartbeatFile(stateDir, "gen"));
    expectValid("watchdog-heartbeat", beat);
    expect(beat).toMatchObject({ gen: 3, stepIdx: 17 });
  });

  it("supervised().snapshot(), before any beat (stepIdx null) and after one", async () => {
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "snap", minIntervalMs: 0, pollMs: 60_000 });
    try {
      await run.snapshot({ step: 0 });
      const before = readJson(snapshotFile(stateDir, "snap"));
      expectValid("watchdog-snapshot", before, "snapshot before a beat");
      expect(before).toMatchObject({ v: 1, stepIdx: null });
      await run.beat({ stage: "tool_call", stepIdx: 41 });
      await run.snapshot({ step: 41, done: ["a", "b"], nothing: null });
      const after = readJson(snapshotFile(stateDir, "snap"));
      expectValid("watchdog-snapshot", after, "snapshot after a beat");
      expect(after).toMatchObject({ stepIdx: 41 });
    } finally {
      await run.close();
    }
  });

  it("sendToInbox's inbox, and the ack of a handled and of a skipped message", async () => {
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "in", generation: 2, pollMs: 60_000 });
    try {
      const heard: number[] = [];
      run.onNudge((m) => {
        heard.push(m.seq);
      });
      await sendToInbox(stateDir, "in", { kind: "nudge", at: Date.now(), text: "go on", gen: 2 });
      await sendToInbox(stateDir, "in", { kind: "context_reset", at: Date.now() });
      expectValid("watchdog-inbox", readJson(inboxFile(stateDir, "in")), "inbox");
      await run.poll();
      expect(heard).toEqual([1]);
      const ack = readJson(ackFile(stateDir, "in"));
      expectValid("watchdog-ack", ack, "ack after a handled message");
      expect(ack).toMatchObject({ v: 1, seq: 2, gen: 2 });

      // For an earlier generation: skipped, and acknowledged all the same.
      await sendToInbox(stateDir, "in", { kind: "nudge", at: Date.now(), gen: 1 });
      await run.poll();
      expect(heard).toEqual([1]);
      const skipped = readJson(ackFile(stateDir, "in"));
      expectValid("watchdog-ack", skipped, "ack after a skipped message");
      expect(skipped).toMatchObject({ seq: 3 });
    } finally {
      await run.close();
    }
  });

  it("the ack of a process without a generation has no gen", async () => {
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "nogen", pollMs: 60_000 });
    try {
      await sendToInbox(stateDir, "nogen", { kind: "context_reset", at: Date.now(), gen: 5 });
      await run.poll();
      const ack = readJson(ackFile(stateDir, "nogen"));
      expectValid("watchdog-ack", ack);
      expect(ack).not.toHaveProperty("gen");
    } finally {
      await run.close();
    }
  });

  it("an inbox of 20 kept messages", async () => {
    const stateDir = freshDir();
    for (let i = 0; i < 25; i++)
      await sendToInbox(stateDir, "many", { kind: "nudge", at: Date.now(), gen: 1 + (i % 3) });
    const inbox = readJson(inboxFile(stateDir, "many")) as { messages: { seq: number }[] };
    expectValid("watchdog-inbox", inbox);
    expect(inbox.messages.map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
  });
});

describe("the heartbeat schema and the supervisor's reader agree", () => {
  const now = Date.now();
  const base: Record<string, unknown> = {
    v: 1,
    sessionId: "table",
    pid: 4242,
    stage: "tool_call",
    stepIdx: 7,
    at: now - 1_000,
    stepAt: now - 5_000,
    startedAt: now - 60_000,
  };
  const beat = (changes: Record<string, unknown> = {}): string =>
    JSON.stringify({ ...base, ...changes });
  const without = (key: string): string =>
    JSON.stringify(Object.fromEntries(Object.entries(base).filter(([k]) => k !== key)));
  const REQUIRED = ["v", "sessionId", "pid", "stage", "stepIdx", "at", "stepAt", "startedAt"];

  /** [what, the file's text, whether it is a usable heartbeat] */
  const rows: [string, string, boolean][] = [
    ["every required field", beat(), true],
    ["every optional field", beat({ contextTokens: 48_000, lastTool: "search", gen: 3 }), true],
    ["fractional timestamps", beat({ at: now - 0.5, stepAt: now - 1.25 }), true],
    ["contextTokens 0", beat({ contextTokens: 0 }), true],
    ["gen 1", beat({ gen: 1 }), true],
    ["stepIdx 0", beat({ stepIdx: 0 }), true],
    ["stepIdx the largest safe integer", beat({ stepIdx: Number.MAX_SAFE_INTEGER }), true],
    ["stepIdx written as 7.0", beat().replace('"stepIdx":7', '"stepIdx":7.0'), true],
    ["v written as 1.0", beat().replace('"v":1', '"v":1.0'), true],
    ["an unknown field (forward compatible)", beat({ tokensPerSecond: 12.5 }), true],
    ["whitespace and newlines", JSON.stringify({ ...base }, null, 2) + "\n", true],
    ["timestamps in the past", beat({ at: 0, stepAt: 0, startedAt: 0 }), true],
    // Accepted by both, though a writer must not write them (docs section 6.1).
    ["stage not snake_case (not checked)", beat({ stage: "Tool Call!" }), true],
    ["lastTool not a string", beat({ lastTool: 5 }), false],
    ["pid not an integer", beat({ pid: 12.5 }), false],

    ...REQUIRED.map((key): [string, string, boolean] => [`${key} missing`, without(key), false]),
    ["stage a number", beat({ stage: 3 }), false],
    ["stage null", beat({ stage: null }), false],
    ["sessionId a number", beat({ sessionId: 42 }), false],
    ["stepIdx negative", beat({ stepIdx: -1 }), false],
    ["stepIdx a fraction", beat({ stepIdx: 1.5 }), false],
    ["stepIdx a string", beat({ stepIdx: "7" }), false],
    ["stepIdx past the safe integers", beat({ stepIdx: 2 ** 53 }), false],
    ["v 2", beat({ v: 2 }), false],
    ['v "1"', beat({ v: "1" }), false],
    ["gen 0", beat({ gen: 0 }), false],
    ["gen negative", beat({ gen: -1 }), false],
    ["gen a fraction", beat({ gen: 1.5 }), false],
    ["gen null", beat({ gen: null }), false],
    ["contextTokens negative", beat({ contextTokens: -1 }), false],
    ["contextTokens a string", beat({ contextTokens: "48000" }), false],
    ["at a string", beat({ at: String(now) }), false],
    ["pid a string", beat({ pid: "4242" }), false],
    [
      "at past the doubles (1e400 reads as Infinity)",
      beat().replace(/"at":[0-9]+/, '"at":1e400'),
      false,
    ],
    [
      "contextTokens bare NaN (Python's default)",
      beat().replace(/}$/, ',"contextTokens":NaN}'),
      false,
    ],
    ["contextTokens bare Infinity", beat().replace(/}$/, ',"contextTokens":Infinity}'), false],
    ["stepAt bare -Infinity", beat().replace(/"stepAt":[0-9]+/, '"stepAt":-Infinity'), false],
    ["a BOM before the JSON", "\uFEFF" + beat(), false],
    ["a trailing comma", beat().replace(/}$/, ",}"), false],
    ["cut short (a torn write)", beat().slice(0, 40), false],
    ["an array", `[${beat()}]`, false],
    ["null", "null", false],
    ["a number", "1", false],
    ["a string", JSON.stringify(beat()), false],
    ["empty", "", false],
    ["only whitespace", " \n", false],
  ];

  it.each(rows)("%s", async (_what, text, usable) => {
    const file = join(freshDir(), "s.heartbeat.json");
    writeFileSync(file, text, "utf8");
    const onDisk = readFileSync(file, "utf8");
    const read = await readHeartbeat(file, now);
    expect({ schema: schemaAccepts("watchdog-heartbeat", onDisk), reader: read.ok }).toEqual({
      schema: usable,
      reader: usable,
    });
  });

  // JSON.parse reads 1e400 as Infinity: refused by both (JSON Schema numbers are finite).
  it("contextTokens past the doubles (1e400 reads as Infinity)", async () => {
    const file = join(freshDir(), "s.heartbeat.json");
    const text = beat().replace(/}$/, ',"contextTokens":1e400}');
    writeFileSync(file, text);
    const read = await readHeartbeat(file, now);
    expect(read.ok).toBe(schemaAccepts("watchdog-heartbeat", text));
  });

  describe("what the schema cannot express is the reader's alone", () => {
    it.each(["at", "stepAt", "startedAt"])(
      "%s more than 5 s ahead of the reader's clock: schema-valid, refused as future",
      async (key) => {
        const file = join(freshDir(), "s.heartbeat.json");
        const text = beat({ [key]: now + MAX_SKEW_MS + 1_000 });
        writeFileSync(file, text);
        expect(schemaAccepts("watchdog-heartbeat", text)).toBe(true);
        expect(await readHeartbeat(file, now)).toMatchObject({ ok: false, problem: "future" });
        // Within the allowance, accepted.
        writeFileSync(file, beat({ [key]: now + MAX_SKEW_MS }));
        expect((await readHeartbeat(file, now)).ok).toBe(true);
      },
    );

    it("a file over 64 KiB: schema-valid, refused as too_large", async () => {
      const file = join(freshDir(), "s.heartbeat.json");
      const text = beat({ padding: "x".repeat(MAX_HEARTBEAT_BYTES) });
      writeFileSync(file, text);
      expect(schemaAccepts("watchdog-heartbeat", text)).toBe(true);
      expect(await readHeartbeat(file, now)).toMatchObject({ ok: false, problem: "too_large" });
    });
  });
});

describe("the examples in docs/watchdog-protocol.md", () => {
  const doc = readFileSync(DOC, "utf8");
  /** Each ```json block, and the schema named by the `<!-- schema: NAME -->` line before it. */
  const examples = [...doc.matchAll(/^```json\n([\s\S]*?)^```$/gm)].map((match) => {
    const before = doc.slice(0, match.index).trimEnd().split("\n").at(-1) ?? "";
    const schema = /^<!-- schema: ([a-z-]+) -->$/.exec(before)?.[1];
    const line = doc.slice(0, match.index).split("\n").length;
    return { line, schema, text: match[1] ?? "" };
  });

  it("has examples of every file, each tagged with its schema", () => {
    expect(examples.length).toBeGreaterThanOrEqual(SCHEMAS.length);
    for (const { line, schema } of examples)
      expect(schema, `the json block at line ${line} names no schema`).toBeDefined();
    expect(new Set(examples.map((e) => e.schema))).toEqual(new Set(SCHEMAS));
  });

  it.each(examples)("line $line ($schema) matches its schema", ({ schema, text }) => {
    expect(SCHEMAS).toContain(schema);
    expectValid(schema as SchemaName, JSON.parse(text));
  });

  it.each(examples.filter((e) => e.schema === "watchdog-heartbeat"))(
    "line $line: the supervisor's reader accepts it, read at its own time",
    async ({ text }) => {
      const file = join(freshDir(), "s.heartbeat.json");
      writeFileSync(file, text);
      const { at } = JSON.parse(text) as { at: number };
      expect(await readHeartbeat(file, at)).toMatchObject({ ok: true });
    },
  );

  it.each(SCHEMAS)("names every property of %s", (name) => {
    const schema = schemaOf(name) as {
      properties: Record<string, unknown>;
      $defs?: Record<string, { properties: Record<string, unknown> }>;
    };
    const keys = [
      ...Object.keys(schema.properties),
      ...Object.values(schema.$defs ?? {}).flatMap((def) => Object.keys(def.properties)),
    ];
    for (const key of keys) expect(doc, `\`${key}\` of ${name}`).toContain(`\`${key}\``);
    expect(doc).toContain(`https://selfheal.dev/schemas/${name}.schema.json`);
  });
});
