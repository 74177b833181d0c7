/**
 * `selfheal report`, in process, on temporary files: which files are read (the rotated set,
 * oldest first; several files exactly as given), every input and --html target check with its
 * one line, and the output. Failures a root user never meets (a file it cannot read, a folder it
 * cannot write) and a read that fails midway come from wrapped fs functions.
 */
import {
  createReadStream,
  linkSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { access, constants, writeFile, type FileHandle } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { report } from "../../src/cli/report.js";
import { ioProblem } from "../../src/report/review-files.js";
import { readRuleFile } from "../../src/diagnosis/rule-file.js";
import { compileRules } from "../../src/diagnosis/rules.js";
import { callsLines, DAY as WEEK_DAY, spread, WEEK_START } from "../report/rollups.js";
import { line, watchdogLine } from "./event-lines.js";
import { captured, cli, tempDir } from "./in-process.js";

vi.mock("node:fs/promises", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:fs/promises")>();
  return { ...actual, access: vi.fn(actual.access), writeFile: vi.fn(actual.writeFile) };
});
vi.mock("node:fs", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:fs")>();
  return { ...actual, createReadStream: vi.fn(actual.createReadStream) };
});

afterEach(() => {
  vi.mocked(access).mockClear();
  vi.mocked(createReadStream).mockClear();
});

const root = tempDir("report-command");
let n = 0;
/** A fresh folder for one test. */
const folder = () => {
  const dir = join(root, `t${n++}`);
  mkdirSync(dir);
  return dir;
};
/** Writes `text` to `file`, returns `file`. */
const put = (file: string, text: string) => {
  writeFileSync(file, text);
  return file;
};

const DAY = (d: number) => new Date(Date.UTC(2026, 0, d)).toISOString();
/** Day `d` of January 2026 at midnight as the review's text shows it (UTC by default). */
const SHOWN = (d: number) => `2026-01-${String(d).padStart(2, "0")} 00:00 UTC`;
const at = (d: number) => ({ at: Date.UTC(2026, 0, d) });

/** A usage error: exit 2, nothing on stdout, exactly this line on stderr. */
async function expectUsage(args: string[], message: string): Promise<void> {
  expect(await cli("report", ...args)).toEqual({
    exitCode: 2,
    stdout: "",
    stderr: `selfheal: ${message}\n`,
  });
}

/** An fs error as Node makes them. */
const fsError = (code: string) => Object.assign(new Error(`${code}: failed`), { code });

describe("ioProblem: an I/O failure in one line", () => {
  it.each([
    ["ENOENT", "no such file (ENOENT)"],
    ["EISDIR", "is a folder (EISDIR)"],
    ["EACCES", "permission denied (EACCES)"],
    ["EPERM", "permission denied (EPERM)"],
    ["ENOTDIR", "a part of the path is not a folder (ENOTDIR)"],
    ["ELOOP", "ELOOP"],
    ["toString", "toString"],
    ["", ""],
  ])("code %j: %j", (code, text) => {
    expect(ioProblem(fsError(code))).toBe(text);
  });

  it("no code: the message; not an Error: its text", () => {
    expect(ioProblem(new Error("disk on fire"))).toBe("disk on fire");
    expect(ioProblem(Object.assign(new Error("numeric"), { code: 5 }))).toBe("numeric");
    expect(ioProblem("plain")).toBe("plain");
    expect(ioProblem({ code: 7 })).toBe("[object Object]");
  });
});

describe("selfheal report (in process): its arguments", () => {
  it("no file: exit 2 with the command to run", async () => {
    await expectUsage([], "report needs the event log: selfheal report FILE.jsonl");
    await expectUsage(
      ["--html", join(root, "r.html")],
      "report needs the event log: selfheal report FILE.jsonl",
    );
  });

  it("an unknown flag, or --html without its value: exit 2, one line", async () => {
    for (const [args, message] of [
      [["a.jsonl", "--pdf", "x"], /^selfheal: Unknown option '--pdf'[^\n]*\n$/],
      [["a.jsonl", "--html"], /^selfheal: Option '--html <value>' argument missing[^\n]*\n$/],
    ] as const) {
      const out = await cli("report", ...args);
      expect(out.exitCode).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(message);
    }
  });
});

describe("selfheal report (in process): the files read", () => {
  it("one file: the review of its events, its bad lines named by line number only", async () => {
    const file = put(
      join(folder(), "log.jsonl"),
      `${line(at(2))}\nnot json\n${line({ ...at(1), outcome: "recovered" })}\n`,
    );
    const out = await cli("report", file);
    expect(out.exitCode).toBe(0);
    expect(out.stderr).toBe("");
    const lines = out.stdout.split("\n");
    expect(lines.slice(0, 3)).toEqual([
      `Recovery review: 2 incidents from ${SHOWN(1)} to ${SHOWN(2)}`,
      "(1 lines were not recovery events and were left out)",
      "  line 2: not JSON",
    ]);
    expect(out.stdout).toMatch(/^recovered +1 +50\.0% /m);
    expect(out.stdout).not.toContain("wrote");
    expect(out.stdout.endsWith("\n")).toBe(true);
    expect(out.stdout.endsWith("\n\n")).toBe(false);
  });

  it("one file: its rotated files too, oldest first (FILE.2, FILE.1, FILE), each line named by file", async () => {
    const base = join(folder(), "log.jsonl");
    put(`${base}.2`, `${line(at(1))}\n`);
    put(`${base}.1`, `${line(at(2))}\nnope\n`);
    put(base, `${line(at(3))}\n`);
    const out = await cli("report", base);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n").slice(0, 3)).toEqual([
      `Recovery review: 3 incidents from ${SHOWN(1)} to ${SHOWN(3)}`,
      "(1 lines were not recovery events and were left out)",
      `  ${base}.1 line 2: not JSON`,
    ]);
  });

  it("the rotated set's order, as the files are named when none holds an event", async () => {
    const base = join(folder(), "log.jsonl");
    put(`${base}.3`, "three\n");
    put(`${base}.2`, "two\n");
    put(`${base}.1`, "one\n");
    put(base, "");
    await expectUsage(
      [base],
      `no recovery events in ${base}.3, ${base}.2, ${base}.1, ${base} (3 lines, none a recovery event or rollup; ${base}.3 line 1: not JSON)`,
    );
  });

  it("the rotated set ends at the first number missing, or at one that is not a file", async () => {
    const dir = folder();
    const gap = put(join(dir, "gap.jsonl"), "");
    put(`${gap}.2`, `${line()}\n`); // FILE.1 missing: FILE.2 is not in the set
    await expectUsage([gap], `no recovery events in ${gap} (the file is empty)`);
    const folded = put(join(dir, "folded.jsonl"), "");
    mkdirSync(`${folded}.1`);
    put(`${folded}.2`, `${line()}\n`);
    await expectUsage([folded], `no recovery events in ${folded} (the file is empty)`);
  });

  it("several files: exactly those, in the order given (no rotated files)", async () => {
    const dir = folder();
    const a = put(join(dir, "a.jsonl"), "x\n");
    put(`${a}.1`, `${line()}\n`);
    const b = put(join(dir, "b.jsonl"), "");
    await expectUsage(
      [b, a],
      `no recovery events in ${b}, ${a} (1 lines, none a recovery event or rollup; ${a} line 1: not JSON)`,
    );
    put(b, `${line(at(5))}\n`);
    const out = await cli("report", a, b);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n").slice(0, 3)).toEqual([
      `Recovery review: 1 incidents from ${SHOWN(5)} to ${SHOWN(5)}`,
      "(1 lines were not recovery events and were left out)",
      `  ${a} line 1: not JSON`,
    ]);
  });

  it("a log of watchdog lines only is a review (exit 0), not an empty log", async () => {
    const file = put(join(folder(), "watch.jsonl"), `${watchdogLine()}\n`);
    const out = await cli("report", file);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n")[0]).toBe(
      "Recovery review: 0 incidents (the log holds watchdog lines only)",
    );
    expect(out.stdout).toContain("Gave up (restart intensity reached): 1");
  });

  it("no event at all: exit 2, saying why (empty, or what the lines were)", async () => {
    const dir = folder();
    const empty = put(join(dir, "empty.jsonl"), "");
    await expectUsage([empty], `no recovery events in ${empty} (the file is empty)`);
    const blank = put(join(dir, "blank.jsonl"), "\n\n");
    await expectUsage([blank], `no recovery events in ${blank} (the file is empty)`);
    const junk = put(join(dir, "junk.jsonl"), `{}\n[1]\n${watchdogLine({ kind: "dance" })}\n`);
    await expectUsage(
      [junk],
      `no recovery events in ${junk} (3 lines, none a recovery event or rollup; line 1: at is not a time)`,
    );
    // Lines there are, but none in the period asked for: not an empty file.
    const old = put(join(dir, "old.jsonl"), `${line(at(1))}\n${line(at(2))}\n`);
    await expectUsage(
      [old, "--since", "2026-02-01"],
      `no recovery events in ${old} (all 2 lines are outside the period)`,
    );
  });
});

describe("selfheal report (in process): inputs it cannot read, exit 2 before any work", () => {
  it("a missing file, alone or among several (the first missing one is named)", async () => {
    const dir = folder();
    const missing = join(dir, "missing.jsonl");
    await expectUsage([missing], `cannot read ${missing}: no such file (ENOENT)`);
    const ok = put(join(dir, "ok.jsonl"), `${line()}\n`);
    const other = join(dir, "other.jsonl");
    await expectUsage([ok, missing, other], `cannot read ${missing}: no such file (ENOENT)`);
    await expectUsage(
      [join(ok, "x")],
      `cannot read ${join(ok, "x")}: a part of the path is not a folder (ENOTDIR)`,
    );
  });

  it("a folder", async () => {
    const dir = folder();
    await expectUsage([dir], `cannot read ${dir}: a directory, not a regular file`);
  });

  it("a file it may not read (checked with access R_OK)", async () => {
    const file = put(join(folder(), "secret.jsonl"), `${line()}\n`);
    vi.mocked(access).mockRejectedValueOnce(fsError("EACCES"));
    await expectUsage([file], `cannot read ${file}: permission denied (EACCES)`);
    expect(access).toHaveBeenCalledWith(file, constants.R_OK);
  });

  it("a read that fails midway: the file and what failed", async () => {
    const file = put(join(folder(), "eio.jsonl"), `${line()}\n`);
    // The stream of the file's handle, replaced: the handle is closed as the real stream would.
    const failing = (error: Error) => (_: unknown, options?: BufferEncoding | { fd?: unknown }) => {
      if (typeof options === "object") void (options.fd as FileHandle | undefined)?.close();
      return Readable.from(
        (function* () {
          yield Buffer.from(`${line()}\n`);
          throw error;
        })(),
      ) as unknown as ReturnType<typeof createReadStream>;
    };
    vi.mocked(createReadStream).mockImplementationOnce(failing(fsError("EIO")));
    await expectUsage([file], `cannot read ${file}: EIO`);
    vi.mocked(createReadStream).mockImplementationOnce(failing(new Error("cable unplugged")));
    await expectUsage([file], `cannot read ${file}: cable unplugged`);
  });
});

describe("selfheal report --html (in process)", () => {
  it("writes the page after printing the review, and says where", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    const html = put(join(dir, "review.html"), "an older review"); // overwritten
    const out = await cli("report", file, "--html", html);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.startsWith("Recovery review: 1 incidents")).toBe(true);
    expect(out.stdout.endsWith(`\n\nwrote ${html}\n`)).toBe(true);
    const page = readFileSync(html, "utf8");
    expect(page).toMatch(/^<!doctype html>/i);
    expect(page).toContain("<svg");
    expect(readFileSync(file, "utf8")).toBe(`${line()}\n`);
  });

  it("an HTML path with a newline is said on one line", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    const html = join(dir, "a\nb.html");
    const out = await cli("report", file, "--html", html);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.endsWith(`\nwrote ${join(dir, "a\\nb.html")}\n`)).toBe(true);
    expect(readFileSync(html, "utf8")).toMatch(/^<!doctype html>/i);
  });

  it("a folder that is missing, not a folder, or not writable: exit 2 before reading", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    const nowhere = join(dir, "no", "such", "r.html");
    await expectUsage(
      [file, "--html", nowhere],
      `cannot write ${nowhere}: folder ${dirname(nowhere)}: no such file (ENOENT)`,
    );
    const underFile = join(file, "r.html");
    await expectUsage(
      [file, "--html", underFile],
      `cannot write ${underFile}: folder ${file}: a part of the path is not a folder (ENOTDIR)`,
    );
    const html = join(dir, "r.html");
    vi.mocked(access).mockImplementation((path, mode) =>
      mode === constants.W_OK ? Promise.reject(fsError("EACCES")) : Promise.resolve(),
    );
    try {
      await expectUsage(
        [file, "--html", html],
        `cannot write ${html}: folder ${dir}: permission denied (EACCES)`,
      );
    } finally {
      vi.mocked(access).mockReset();
    }
    expect(vi.mocked(createReadStream)).not.toHaveBeenCalled();
  });

  it("a relative --html path: its folder is named resolved", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    const html = relative(process.cwd(), join(dir, "gone", "r.html"));
    await expectUsage(
      [file, "--html", html],
      `cannot write ${html}: folder ${join(dir, "gone")}: no such file (ENOENT)`,
    );
  });

  it("a folder as the page: exit 2", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    const sub = join(dir, "sub");
    mkdirSync(sub);
    await expectUsage([file, "--html", sub], `cannot write ${sub}: is a folder (EISDIR)`);
  });

  it("never over an input: by path, through a symlink or a hard link, the log untouched", async () => {
    const dir = folder();
    const content = `${line()}\n`;
    const first = put(join(dir, "first.jsonl"), content);
    const second = put(join(dir, "second.jsonl"), content);
    const soft = join(dir, "soft.html");
    symlinkSync(second, soft);
    const hard = join(dir, "hard.html");
    linkSync(second, hard);
    await expectUsage(
      [first, "--html", join(dir, ".", "first.jsonl")],
      `refusing to write the HTML over the input file ${first}`,
    );
    for (const target of [second, soft, hard])
      await expectUsage(
        [first, second, "--html", target],
        `refusing to write the HTML over the input file ${second}`,
      );
    // A rotated file is an input too.
    const rotated = put(`${first}.1`, content);
    await expectUsage(
      [first, "--html", rotated],
      `refusing to write the HTML over the input file ${rotated}`,
    );
    for (const file of [first, second, rotated]) expect(readFileSync(file, "utf8")).toBe(content);
  });

  it("a page that cannot be written after all: exit 2 naming it, the review printed", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line()}\n`);
    // A dangling symlink passes the checks (nothing is there); the write follows it nowhere.
    const html = join(dir, "dangling.html");
    symlinkSync(join(dir, "nowhere", "r.html"), html);
    const out = await cli("report", file, "--html", html);
    expect(out.exitCode).toBe(2);
    expect(out.stdout.startsWith("Recovery review: 1 incidents")).toBe(true);
    expect(out.stdout).not.toContain("wrote");
    expect(out.stderr).toBe(`selfheal: cannot write ${html}: no such file (ENOENT)\n`);
    vi.mocked(writeFile).mockRejectedValueOnce(new Error("quota exceeded"));
    const full = join(dir, "full.html");
    expect((await cli("report", file, "--html", full)).stderr).toBe(
      `selfheal: cannot write ${full}: quota exceeded\n`,
    );
  });

  it("no event: nothing written", async () => {
    const dir = folder();
    const file = put(join(dir, "empty.jsonl"), "");
    const html = join(dir, "r.html");
    const out = await captured(() => report([file, "--html", html]));
    expect(out.threw).toBe(true);
    expect(() => readFileSync(html)).toThrow(/ENOENT/);
  });
});

describe("selfheal report --suggest-rules (in process)", () => {
  /** A log of UNKNOWN texts: one wording three times (a rule), one named by nothing. */
  const unknownLog = (dir: string) =>
    put(
      join(dir, "log.jsonl"),
      [
        ...[1, 2, 3].map((i) =>
          line({ ...at(i), error: `Request budget spent, retry in ${i}s`, outcome: "recovered" }),
        ),
        line({ ...at(4), error: "the sky is green" }),
        line({ ...at(5), pattern: "RATE_LIMIT", error: "rate limited" }),
      ].join("\n") + "\n",
    );

  it("prints the proposals after the review, writes the rule file and says where", async () => {
    const dir = folder();
    const file = unknownLog(dir);
    const out = join(dir, "rules.json");
    const run = await cli("report", file, "--suggest-rules", out);
    expect(run.exitCode).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout.startsWith("Recovery review: 5 incidents")).toBe(true);
    const tail = run.stdout.slice(run.stdout.indexOf("\nSuggested rules:") + 1);
    expect(tail.split("\n")[0]).toBe("Suggested rules: 1 from 4 UNKNOWN texts");
    expect(tail).toMatch(/^rule +pattern +evidence +samples +first seen +last seen +match *$/m);
    const source = String.raw`Request[)\]}>,;:.!?]*\s+[([{<]*budget[)\]}>,;:.!?]*\s+[([{<]*spent[)\]}>,;:.!?]*\s+[([{<]*retry[)\]}>,;:.!?]*\s+[([{<]*in`;
    expect(tail).toMatch(
      new RegExp(
        String.raw`^suggested-rate-limit-1 +RATE_LIMIT +wording: wording "budget" +3 +2026-01-01T00:00:00\.000Z +2026-01-03T00:00:00\.000Z +` +
          `/${source.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}/i *$`,
        "m",
      ),
    );
    expect(tail).toContain("Templates with no pattern to propose");
    expect(tail).toContain("  - the sky is green (x1)");
    expect(run.stdout.endsWith(`\n\nwrote ${out}\n`)).toBe(true);

    const text = readFileSync(out, "utf8");
    expect(text.endsWith("}\n")).toBe(true);
    const written = JSON.parse(text) as { version: number; source: string; rules: unknown[] };
    expect(written).toMatchObject({
      version: 1,
      source: `selfheal report: ${DAY(1)} to ${DAY(5)}`,
      rules: [
        {
          name: "suggested-rate-limit-1",
          pattern: "RATE_LIMIT",
          confidence: 0.6,
          match: {
            message: [
              "Request[)\\]}>,;:.!?]*\\s+[([{<]*budget[)\\]}>,;:.!?]*\\s+[([{<]*spent[)\\]}>,;:.!?]*\\s+[([{<]*retry[)\\]}>,;:.!?]*\\s+[([{<]*in",
            ],
          },
          evidence: { samples: 3, recovered: 3, tools: ["lookup"] },
        },
      ],
    });
    // The file is one createSelfHealing loads.
    const rules = readRuleFile(out);
    expect(compileRules(rules).map((r) => r.name)).toEqual(["suggested-rate-limit-1"]);
  });

  it("with --html too: both written, the page first; without the flag, no proposals", async () => {
    const dir = folder();
    const file = unknownLog(dir);
    const html = join(dir, "r.html");
    const out = join(dir, "rules.json");
    const both = await cli("report", file, "--suggest-rules", out, "--html", html);
    expect(both.exitCode).toBe(0);
    expect(both.stdout.endsWith(`\n\nwrote ${html}\n\nwrote ${out}\n`)).toBe(true);
    expect(readFileSync(html, "utf8")).toMatch(/^<!doctype html>/i);
    expect(JSON.parse(readFileSync(out, "utf8"))).toMatchObject({ version: 1 });
    const plain = await cli("report", file);
    expect(plain.stdout).not.toContain("Suggested rules:");
  });

  it("a log with no UNKNOWN text: an empty rule file, said so", async () => {
    const dir = folder();
    const file = put(join(dir, "log.jsonl"), `${line({ pattern: "TIMEOUT" })}\n`);
    const out = join(dir, "rules.json");
    const run = await cli("report", file, "--suggest-rules", out);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("\nSuggested rules: 0 from 0 UNKNOWN texts\n");
    expect(readRuleFile(out)).toEqual([]);
  });

  it.each([
    [
      "the target's folder is missing",
      (dir: string) => [join(dir, "no", "rules.json")],
      (dir: string) =>
        `cannot write ${join(dir, "no", "rules.json")}: folder ${join(dir, "no")}: no such file (ENOENT)`,
    ],
    [
      "the target is a folder",
      (dir: string) => {
        mkdirSync(join(dir, "sub"));
        return [join(dir, "sub")];
      },
      (dir: string) => `cannot write ${join(dir, "sub")}: is a folder (EISDIR)`,
    ],
    [
      "the target is the input file",
      (dir: string) => [join(dir, "log.jsonl")],
      (dir: string) =>
        `refusing to write the rule file over the input file ${join(dir, "log.jsonl")}`,
    ],
    [
      "the target is a hard link to the input",
      (dir: string) => {
        linkSync(join(dir, "log.jsonl"), join(dir, "hard.json"));
        return [join(dir, "hard.json")];
      },
      (dir: string) =>
        `refusing to write the rule file over the input file ${join(dir, "log.jsonl")}`,
    ],
    [
      "the same path as --html",
      (dir: string) => [join(dir, "out"), "--html", join(dir, ".", "out")],
      () => "--html and --suggest-rules name the same file",
    ],
  ])("%s: exit 2, one line, nothing written", async (_, args, message) => {
    const dir = folder();
    const content = `${line()}\n`;
    const file = put(join(dir, "log.jsonl"), content);
    await expectUsage([file, "--suggest-rules", ...args(dir)], message(dir));
    expect(readFileSync(file, "utf8")).toBe(content);
    expect(() => readFileSync(join(dir, "out"))).toThrow(/ENOENT/);
  });

  it("--suggest-rules without its value: exit 2, one line", async () => {
    const out = await cli("report", "a.jsonl", "--suggest-rules");
    expect(out.exitCode).toBe(2);
    expect(out.stdout).toBe("");
    expect(out.stderr).toMatch(
      /^selfheal: Option '--suggest-rules <value>' argument missing[^\n]*\n$/,
    );
  });

  it("the help lists the flag", async () => {
    const out = await cli("report", "--help");
    expect(out.exitCode).toBe(0);
    const [usage] = out.stdout.split("\n\n");
    expect(usage).toMatch(/^Usage: selfheal report /);
    expect(usage).toContain("[--suggest-rules OUT.json]");
    expect(out.stdout).toMatch(/^ {2}--suggest-rules OUT\.json +group the UNKNOWN texts/m);
  });
});

describe("selfheal report --suggest-thresholds (in process)", () => {
  const week = (dir: string, factor: number) => {
    const shift = WEEK_START + 3.5 * WEEK_DAY;
    const steady = spread(30, 150, 250);
    return put(
      join(dir, "calls.jsonl"),
      callsLines("support", "search", WEEK_START, WEEK_START + 7 * WEEK_DAY, (t) => ({
        ok: 30,
        latencies: t < shift ? steady : steady.map((ms) => ms * factor),
      })).join("\n") + "\n",
    );
  };

  it("prints the proposals and the config to paste after the review; a log of rollups only is a log", async () => {
    const run = await cli("report", week(folder(), 2), "--suggest-thresholds");
    expect(run.exitCode).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout.startsWith("Recovery review: 0 incidents")).toBe(true);
    const tail = run.stdout.slice(run.stdout.indexOf("\nSuggested thresholds:") + 1);
    expect(tail.split("\n")[0]).toBe(
      "Suggested thresholds: 1 tool signals and 0 stall limits to change, from 10080 rollup lines",
    );
    expect(tail).toMatch(
      /^support +search +P95 latency +302400 +P95 \d+ ms before 2026-11-26T12:00:00\.000Z/m,
    );
    expect(tail).toContain('Paste:\ncreateSelfHealing({ agent: "support", health: {');
  });

  it("a steady week: no change", async () => {
    const run = await cli("report", week(folder(), 1), "--suggest-thresholds");
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("\nNo change proposed: the current settings fit the period.");
    expect(run.stdout).not.toContain("Paste:");
  });

  it("without the flag, no proposals in the text; the usage names it", async () => {
    const run = await cli("report", week(folder(), 2));
    expect(run.stdout).not.toContain("Suggested thresholds");
    const help = await cli("report", "--help");
    expect(help.stdout).toContain("[--suggest-thresholds [--json]]");
    expect(help.stdout).toMatch(/^ {2}--suggest-thresholds +replay the health thresholds/m);
  });
});

describe("selfheal report (in process): the period, the comparison and the zone", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** One incident a day, on days 1 to 8 of January 2026 at midnight. */
  const week = () =>
    put(
      join(folder(), "week.jsonl"),
      `${[1, 2, 3, 4, 5, 6, 7, 8].map((d) => line(at(d))).join("\n")}\n`,
    );
  const headline = (stdout: string) => stdout.split("\n")[0];

  it("--since and --until: the events from since (inclusive) to until (exclusive)", async () => {
    const out = await cli("report", week(), "--since", DAY(3), "--until", "2026-01-06");
    expect(out.exitCode).toBe(0);
    expect(headline(out.stdout)).toBe(`Recovery review: 3 incidents in ${SHOWN(3)} to ${SHOWN(6)}`);
    expect(out.stdout).toContain("(5 lines dated outside the period were left out)");
  });

  it("a span back is counted from --until when there is one, else from now", async () => {
    const file = week();
    const back = await cli("report", file, "--until", DAY(6), "--since", "2d");
    expect(headline(back.stdout)).toBe(
      `Recovery review: 2 incidents in ${SHOWN(4)} to ${SHOWN(6)}`,
    );
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.UTC(2026, 0, 7, 12));
    const sinceOnly = await cli("report", file, "--since", "36h");
    expect(headline(sinceOnly.stdout)).toBe(
      "Recovery review: 2 incidents in 2026-01-06 00:00 UTC to 2026-01-07 12:00 UTC",
    );
    const untilOnly = await cli("report", file, "--until", "3d");
    expect(headline(untilOnly.stdout)).toMatch(/^Recovery review: 4 incidents /);
  });

  it("--compare-previous: the period just before, as long, beside each figure", async () => {
    const dir = folder();
    const page = join(dir, "week.html");
    const out = await cli(
      "report",
      week(),
      "--since",
      DAY(5),
      "--until",
      DAY(7),
      "--compare-previous",
      "--html",
      page,
    );
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toContain(
      `Headline, against the previous period (${SHOWN(3)} to ${SHOWN(5)})`,
    );
    expect(out.stdout).toMatch(/^incidents +2 +2 += *$/m);
    const html = readFileSync(page, "utf8");
    expect(html).toContain(`Compared with ${SHOWN(3)} to ${SHOWN(5)}`);
    // Without the flag: no comparison anywhere.
    const alone = await cli("report", week(), "--since", DAY(5), "--until", DAY(7));
    expect(alone.stdout).not.toContain("previous period");
  });

  it("--tz: times in that zone, said; UTC by default", async () => {
    const dir = folder();
    const page = join(dir, "paris.html");
    const file = week();
    const paris = await cli("report", file, "--tz", "Europe/Paris", "--html", page);
    expect(headline(paris.stdout)).toBe(
      "Recovery review: 8 incidents from 2026-01-01 01:00 GMT+1 to 2026-01-08 01:00 GMT+1",
    );
    expect(readFileSync(page, "utf8")).toContain("Times in Europe/Paris.");
    const utc = await cli("report", file);
    expect(headline(utc.stdout)).toBe(
      `Recovery review: 8 incidents from ${SHOWN(1)} to ${SHOWN(8)}`,
    );
  });

  it("bad period or zone flags: exit 2, one line each", async () => {
    const file = week();
    await expectUsage(
      [file, "--since", "yesterday"],
      '--since "yesterday": expected an ISO date or time (2026-11-23, 2026-11-23T08:00Z) or a span back (7d, 12h, 90m, 2w)',
    );
    await expectUsage(
      [file, "--until", "soon"],
      '--until "soon": expected an ISO date or time (2026-11-23, 2026-11-23T08:00Z) or a span back (7d, 12h, 90m, 2w)',
    );
    await expectUsage(
      [file, "--compare-previous"],
      "--compare-previous needs --since: the period to compare with the one before",
    );
    await expectUsage(
      [file, "--since", DAY(5), "--until", DAY(5)],
      `--since ${DAY(5)} is not before --until ${DAY(5)}`,
    );
    await expectUsage(
      [file, "--since", DAY(6), "--until", DAY(5)],
      `--since ${DAY(6)} is not before --until ${DAY(5)}`,
    );
    await expectUsage(
      [file, "--tz", "Mars/Olympus"],
      '--tz "Mars/Olympus": not a time zone (try UTC or Europe/Paris)',
    );
  });
});
