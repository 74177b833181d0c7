import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

/** Every module `entry` loads (static and dynamic imports), and the packages they name. */
function importGraph(entry: string) {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(file, "utf8");
    for (const [, spec] of text.matchAll(
      /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g,
    )) {
      if (spec === undefined) continue;
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec.replace(/\.js$/, ".ts")));
      else packages.add(spec);
    }
  };
  visit(resolve(SRC, entry));
  return { files: [...files].map((f) => f.slice(SRC.length + 1)), packages: [...packages] };
}

/**
 * What the core may load besides node: modules. re2js (pure JS, no dependencies) matches users'
 * diagnosis rules in linear time (src/diagnosis/linear-regex.ts): that guards the agent against
 * its own rule files, so it cannot be an optional peer.
 */
const CORE_PACKAGES = ["@opentelemetry/api", "re2js"];

describe("the core imports no SDK", () => {
  it("src/index.ts and everything it loads import only @opentelemetry/api, re2js and node: modules", () => {
    const { files, packages } = importGraph("index.ts");
    expect(files.length).toBeGreaterThan(20);
    expect(files.filter((f) => f.startsWith("otel/"))).toEqual([]);
    expect(packages.filter((p) => !p.startsWith("node:") && !CORE_PACKAGES.includes(p))).toEqual(
      [],
    );
    expect(packages).toContain("re2js");
  });

  it("the selfheal/otel entry imports only its declared peers", async () => {
    const { packages } = importGraph("otel/index.ts");
    const pkg = (await import("../../package.json", { with: { type: "json" } })).default as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
      dependencies: Record<string, string>;
    };
    const declared = new Set([
      ...Object.keys(pkg.peerDependencies),
      ...Object.keys(pkg.dependencies),
    ]);
    const sdk = packages
      .filter((p) => !p.startsWith("node:"))
      .map((p) => p.split("/").slice(0, 2).join("/"));
    expect(sdk.filter((p) => !declared.has(p))).toEqual([]);
    // Every peer is optional: the core installs without any of them.
    for (const peer of Object.keys(pkg.peerDependencies))
      expect(pkg.peerDependenciesMeta[peer]?.optional, peer).toBe(true);
  });
});
