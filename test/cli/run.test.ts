/**
 * The `selfheal` dispatch and its exit codes, in process (the built bin's own runs are in
 * demo.test.ts and the other spawn suites): help, version, each command reached with its own
 * arguments, unknown commands, and how each kind of error ends the process.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEMO_USAGE } from "../../src/cli/demo.js";
import { CommandFailedError, UsageError } from "../../src/cli/errors.js";
import { REPORT_USAGE } from "../../src/cli/report.js";
import { USAGE, exitFor, version } from "../../src/cli/run.js";
import { STATUS_USAGE } from "../../src/cli/status.js";
import { WATCH_USAGE } from "../../src/cli/watch.js";
import { SelfHealConfigError } from "../../src/errors.js";
import { cli } from "./in-process.js";

const PACKAGE = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
) as { version: string };

const KNOWN = "(known: demo, report, status, watch)";

describe("selfheal (in process): dispatch", () => {
  it("no command: the usage on stderr, exit 2, nothing on stdout", async () => {
    expect(await cli()).toEqual({ exitCode: 2, stdout: "", stderr: `${USAGE}\n` });
  });

  it.each(["--help", "-h", "help"])("%s: the usage on stdout, exit 0", async (flag) => {
    expect(await cli(flag)).toEqual({ exitCode: 0, stdout: `${USAGE}\n`, stderr: "" });
  });

  it.each(["--version", "-v", "version"])("%s: the package's version, exit 0", async (flag) => {
    expect(PACKAGE.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(version()).toBe(PACKAGE.version);
    expect(await cli(flag)).toEqual({ exitCode: 0, stdout: `${PACKAGE.version}\n`, stderr: "" });
  });

  it.each([
    ["demo", DEMO_USAGE],
    ["report", REPORT_USAGE],
    ["status", STATUS_USAGE],
    ["watch", WATCH_USAGE],
  ])("%s gets the arguments after its name: %s --help prints its usage", async (name, usage) => {
    expect(await cli(name, "--help")).toEqual({ exitCode: 0, stdout: `${usage}\n`, stderr: "" });
    expect(await cli(name, "-h")).toEqual({ exitCode: 0, stdout: `${usage}\n`, stderr: "" });
  });

  it.each(["launch", "__proto__", "toString", "Demo", "", "--demo"])(
    "unknown command %j: exit 2, one line naming the known ones",
    async (name) => {
      expect(await cli(name, "--help")).toEqual({
        exitCode: 2,
        stdout: "",
        stderr: `selfheal: unknown command "${name}" ${KNOWN}\n`,
      });
    },
  );

  it("a command's name is shown escaped, never obeyed by the terminal", async () => {
    expect((await cli("x\u001b[2J\ny")).stderr).toBe(
      `selfheal: unknown command "x\\x1b[2J\\ny" ${KNOWN}\n`,
    );
  });

  it("a command's bad flag (a parseArgs error) is a usage error: exit 2, one line", async () => {
    const out = await cli("demo", "--sceanrio", "x");
    expect(out.exitCode).toBe(2);
    expect(out.stdout).toBe("");
    expect(out.stderr).toMatch(/^selfheal: Unknown option '--sceanrio'[^\n]*\n$/);
  });
});

/** An error with a `code`, as Node and selfheal throw them. */
const coded = (code: unknown, message = "m", base = Error) =>
  Object.assign(new base(message), { code });

describe("exitFor: what the bin ends with", () => {
  it("a UsageError: one line, exit 2; a leading 'selfheal: ' is not doubled", () => {
    expect(exitFor(new UsageError("bad flag"))).toEqual({
      exitCode: 2,
      text: "selfheal: bad flag\n",
    });
    expect(exitFor(new UsageError("selfheal: said already"))).toEqual({
      exitCode: 2,
      text: "selfheal: said already\n",
    });
    // Only at the start.
    expect(exitFor(new UsageError("a selfheal: b")).text).toBe("selfheal: a selfheal: b\n");
  });

  it("a usage error's newlines and control characters are escaped: one line", () => {
    expect(exitFor(new UsageError("two\nlines\r\t\u001b[2J")).text).toBe(
      "selfheal: two\\nlines\\r\\t\\x1b[2J\n",
    );
  });

  it("a SELFHEAL_CONFIG error (a bad OTEL_* value) is a usage error", () => {
    expect(exitFor(coded("SELFHEAL_CONFIG", "OTEL_EXPORTER_OTLP_PROTOCOL: unknown"))).toEqual({
      exitCode: 2,
      text: "selfheal: OTEL_EXPORTER_OTLP_PROTOCOL: unknown\n",
    });
    const config = new SelfHealConfigError("x", "y");
    expect(exitFor(config)).toEqual({ exitCode: 2, text: "selfheal: invalid option `x`: y\n" });
  });

  it.each([
    "ERR_PARSE_ARGS_UNKNOWN_OPTION",
    "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
    "ERR_PARSE_ARGS",
  ])("a parseArgs error (%s) is a usage error", (code) => {
    expect(exitFor(coded(code, "Unknown option '--x'", TypeError))).toEqual({
      exitCode: 2,
      text: "selfheal: Unknown option '--x'\n",
    });
  });

  it("a CommandFailedError: one line, exit 1, its text as it is", () => {
    expect(exitFor(new CommandFailedError("cannot read\nthe fleet"))).toEqual({
      exitCode: 1,
      text: "selfheal: cannot read\\nthe fleet\n",
    });
    expect(exitFor(new CommandFailedError("selfheal: x")).text).toBe("selfheal: selfheal: x\n");
  });

  it("anything else is a bug: its stack, control characters escaped (lines kept), exit 1", () => {
    const bug = new Error("boom");
    bug.stack = "Error: boom\r\n    at f (x.js:1:1)\u001b[2J";
    expect(exitFor(bug)).toEqual({
      exitCode: 1,
      text: "selfheal: Error: boom\n    at f (x.js:1:1)\\x1b[2J\n",
    });
    const stackless = new Error("no stack");
    delete stackless.stack;
    expect(exitFor(stackless)).toEqual({ exitCode: 1, text: "selfheal: no stack\n" });
  });

  it.each([
    ["another code", coded("X_ERR_PARSE_ARGS", "other")],
    ["a code that is no string", coded(2, "numeric")],
    ["a code that only contains the parseArgs one", coded("E_ERR_PARSE_ARGS_X", "inner")],
  ])("%s is a bug too", (_name, error) => {
    error.stack = `Error: ${error.message}`;
    expect(exitFor(error)).toEqual({ exitCode: 1, text: `selfheal: Error: ${error.message}\n` });
  });

  it.each([
    ["a string", "boom\u0007", "selfheal: boom\\x07\n"],
    ["null", null, "selfheal: null\n"],
    ["undefined", undefined, "selfheal: undefined\n"],
    ["an object", { reason: "x" }, "selfheal: [object Object]\n"],
  ])("%s thrown: its text, exit 1", (_name, thrown, text) => {
    expect(exitFor(thrown)).toEqual({ exitCode: 1, text });
  });

  it("an object with a usage code and a message is a usage error", () => {
    expect(exitFor({ code: "SELFHEAL_CONFIG", message: "selfheal: bad" })).toEqual({
      exitCode: 2,
      text: "selfheal: bad\n",
    });
  });
});
