import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

describe("examples/quickstart.ts (against the built package, as a user runs it)", () => {
  it("prints spans, goes critical and refuses the write, without leaking the key", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "examples/quickstart.ts"],
      {
        timeout: 20_000,
      },
    );
    expect(stdout).toContain("span agent.tool_call  tool=search_docs outcome=success");
    expect(stdout).toContain("status-change agent: healthy -> critical");
    expect(stdout).toContain("status: critical");
    expect(stdout).toContain("tool=issue_refund outcome=blocked");
    expect(stdout).toContain('refused: selfheal: write tool "issue_refund" refused');
    expect(stdout).not.toContain("sk-live");
  });
});
