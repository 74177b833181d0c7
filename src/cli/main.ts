#!/usr/bin/env node
/**
 * The `selfheal` command (package.json's bin): run.ts dispatches and maps errors to exit codes;
 * this file only wires them to the process. `selfheal demo` plays an incident scenario on virtual
 * time (demo.ts); `selfheal status --redis URL` prints a fleet's health from Redis (ioredis is
 * loaded for that command only).
 */
// Stryker disable all: the bin runs at import, so only the spawn suites (test/cli/*.test.ts) reach
// it, and Stryker cannot see a child process; what it wires up is run.ts, tested in process.
import { exitFor, run } from "./run.js";

// A closed stdout (`selfheal demo | head -1`) is the reader saying it has seen enough.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  process.stderr.write(`selfheal: cannot write the output: ${error.code ?? error.message}\n`);
  process.exit(1);
});

run(process.argv.slice(2)).then(
  (exitCode) => {
    if (exitCode !== undefined) process.exitCode = exitCode;
  },
  (error: unknown) => {
    const { exitCode, text } = exitFor(error);
    process.stderr.write(text);
    process.exitCode = exitCode;
  },
);
