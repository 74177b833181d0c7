import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { builtJs, CHILD_HANG_MS } from "./helpers/built-js.js";

// Each example as built JS on dist/ (test/helpers/built-js.ts), never tsx, under generous limits:
// what it prints is the test, not how long it took (issue 27).

describe("examples/quickstart.ts (against the built package, as a user runs it)", () => {
  it("prints spans, diagnoses and recovers from the outage, refuses the write, leaks no key", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [builtJs("examples/quickstart.ts")],
      { timeout: CHILD_HANG_MS },
    );
    expect(stdout).toContain("span agent.tool_call  tool=search_docs outcome=success");
    expect(stdout).toContain("diagnosis search_docs: SERVICE_DOWN");
    expect(stdout).toContain(
      "recovery search_docs: retry_once -> failover_to_secondary (skipped) -> circuit_break -> degrade_to_readonly -> escalate_to_human => escalated",
    );
    expect(stdout).toContain("search failed: HumanEscalationRequiredError");
    expect(stdout).toContain("tool=issue_refund outcome=blocked");
    expect(stdout).toContain("refund refused: selfheal: write tool");
    expect(stdout).toMatch(/circuit for "search_docs" is open/);
    expect(stdout).toMatch(
      /^status: warning .*read-only true, open circuits \{"search_docs":"open"\}\)$/m,
    );
    expect(stdout).not.toContain("sk-live");
  }, 150_000);
});

describe("examples/streams.ts (against the built package, as a user runs it)", () => {
  it("a cut, a stall and a slow first token: each restarted or failed over to a whole answer", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [builtJs("examples/streams.ts")],
      { timeout: CHILD_HANG_MS },
    );
    const whole = 'answer: "The refund policy allows returns within thirty days of delivery."';
    expect(stdout.split("\n").filter((l) => l.includes(whole))).toHaveLength(3);
    expect(stdout).toContain("recovery: STREAM_TRUNCATED -> failover_to_secondary => recovered");
    expect(stdout).toContain("recovery: STREAM_STALLED -> failover_to_secondary => recovered");
    expect(stdout).toContain(
      "recovery: STREAM_FIRST_TOKEN_TIMEOUT -> failover_to_secondary => recovered",
    );
    expect(stdout).toMatch(
      /shown so far: "The refund policy allows" -> restart \(discard \d+ chunks\)/,
    );
  }, 150_000);
});
