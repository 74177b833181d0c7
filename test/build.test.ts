// The build keeps the CLI executable (issue 27): `npm ci` sets the bit on package.json's bins,
// and `npm run build`, which writes dist/ anew, must set it again.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { binFiles, makeBinsExecutable } from "../scripts/executable-bins.js";

const ROOT = resolve(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  scripts: Record<string, string>;
};

const modeOf = (file: string) => statSync(file).mode & 0o777;

describe("npm run build leaves package.json's bins executable", () => {
  const scratch: string[] = [];
  afterEach(() => {
    for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** A package in a temporary directory with `bin` and the files given, each with its mode. */
  function fakePackage(bin: unknown, files: Record<string, number>): string {
    const root = mkdtempSync(join(tmpdir(), "selfheal-bins-"));
    scratch.push(root);
    writeFileSync(join(root, "package.json"), JSON.stringify({ name: "x", bin }));
    for (const [file, mode] of Object.entries(files)) {
      mkdirSync(join(root, file, ".."), { recursive: true });
      writeFileSync(join(root, file), "#!/usr/bin/env node\nconsole.log('ran');\n");
      chmodSync(join(root, file), mode); // whatever the umask
    }
    return root;
  }

  it("its last step makes them executable, after tsc and the CommonJS view have written dist/", () => {
    const steps = pkg.scripts.build?.split(" && ") ?? [];
    expect(steps.at(-1)).toBe("tsx scripts/executable-bins.ts");
    expect(steps.indexOf("tsc -p tsconfig.build.json")).toBeLessThan(steps.length - 1);
    expect(binFiles(ROOT)).toEqual([join(ROOT, "dist/cli/main.js")]);
  });

  it("the step adds the execute bits where the read bits are: 0644 becomes 0755", () => {
    const root = fakePackage(
      { a: "dist/a.js", b: "dist/sub/b.js" },
      { "dist/a.js": 0o644, "dist/sub/b.js": 0o600 },
    );
    makeBinsExecutable(root);
    expect(modeOf(join(root, "dist/a.js"))).toBe(0o755);
    expect(modeOf(join(root, "dist/sub/b.js"))).toBe(0o700); // private stays private
  });

  it("run as the build runs it (`tsx scripts/executable-bins.ts [root]`), on a bin given as a string", () => {
    const root = fakePackage("dist/cli.js", { "dist/cli.js": 0o644 });
    const out = spawnSync(
      process.execPath,
      ["--import", "tsx", join(ROOT, "scripts/executable-bins.ts"), root],
      { encoding: "utf8" },
    );
    expect(out.stderr).toBe("");
    expect(out.status).toBe(0);
    expect(modeOf(join(root, "dist/cli.js"))).toBe(0o755);
    // Executable, it runs by its shebang, as `npx selfheal` runs it.
    expect(spawnSync(join(root, "dist/cli.js"), { encoding: "utf8" }).stdout).toBe("ran\n");
  });

  it("a bin the build did not write fails the build, naming it", () => {
    const root = fakePackage({ gone: "dist/gone.js" }, {});
    expect(() => makeBinsExecutable(root)).toThrow(
      `package.json names bin ${join(root, "dist/gone.js")}, which the build did not write`,
    );
  });

  it("dist/cli/main.js, as `npm test` builds it, is executable and runs by its shebang", () => {
    const cli = join(ROOT, pkg.bin.selfheal ?? "");
    expect(modeOf(cli) & 0o111).toBe(0o111);
    const out = spawnSync(cli, ["--help"], { encoding: "utf8", timeout: 30_000 });
    expect(out.error).toBeUndefined();
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/selfheal/);
  });
});
