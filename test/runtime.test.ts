import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * The runtime matrix of .ci/run runs the suite once per Node.js line, with that runtime's
 * directory first on the PATH (scripts/node-runtime.sh). SELFHEAL_NODE_MAJOR names the line a run
 * is meant to test: these checks fail the run if vitest's workers, or the `node` and `npm` the tests
 * spawn by name, are another runtime (a test would otherwise pass on the machine's Node 20 and
 * prove nothing about 22 or 24).
 */
const expected = process.env["SELFHEAL_NODE_MAJOR"];
const major = (version: string): string => version.replace(/^v/, "").split(".")[0] ?? "";

describe.runIf(expected !== undefined && expected !== "")(
  `the runtime matrix: this run is Node ${expected ?? ""}`,
  () => {
    it("vitest's worker runs on it", () => {
      expect(major(process.version)).toBe(expected);
    });

    it("`node` on the PATH is the same binary, so spawned `node` and npm scripts run on it", () => {
      const version = execFileSync("node", ["-p", "process.version"], { encoding: "utf8" }).trim();
      expect(version).toBe(process.version);
      const npmNode = execFileSync("npm", ["exec", "-c", "node -p process.execPath"], {
        encoding: "utf8",
      }).trim();
      expect(npmNode).toBe(process.execPath);
    });
  },
);
