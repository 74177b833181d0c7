/**
 * The Collector distribution built from collector/builder-config.yaml (the ocb manifest) and
 * collector/build/ (what ocb generates from it: go.mod, go.sum, main.go, components.go), and the
 * Collector configurations it runs. Read by collector-build.test.ts (the two agree) and
 * collector-validate.test.ts (the binary validates and runs the configurations).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { list, record, ROOT } from "./config-files.js";

export const BUILDER_CONFIG = "builder-config.yaml";
export const BUILD_DIR = join(ROOT, "collector", "build");
export const BUILD_SCRIPT = join(ROOT, "scripts", "build-collector.sh");

/** The Collector configurations: collector/*.yaml except the ocb manifest. */
export function collectorConfigFiles(): string[] {
  return readdirSync(join(ROOT, "collector"))
    .filter((f) => /\.ya?ml$/.test(f) && f !== BUILDER_CONFIG)
    .sort();
}

export const COMPONENT_CLASSES = [
  "receivers",
  "processors",
  "exporters",
  "connectors",
  "extensions",
] as const;
export type ComponentClass = (typeof COMPONENT_CLASSES)[number];

/** One `gomod:` entry of the manifest. */
export interface BuilderModule {
  /** `path version`, as written. */
  gomod: string;
  module: string;
  version: string;
  /** The Go package whose NewFactory() it contributes (`import:`, else the module). */
  importPath: string;
}

export interface BuilderConfig {
  dist: { name: string; module: string; version: string; outputPath: string };
  components: Record<ComponentClass, BuilderModule[]>;
  providers: BuilderModule[];
  telemetry: BuilderModule;
  /** `replaces:` lines, `old => new version`. */
  replaces: string[];
}

function builderModule(value: unknown, where: string): BuilderModule {
  const entry = record(value, where);
  const gomod = typeof entry.gomod === "string" ? entry.gomod : "";
  const match = /^(\S+) (v\d+\.\d+\.\d+\S*)$/.exec(gomod);
  if (match?.[1] === undefined || match[2] === undefined)
    throw new Error(`${where}: gomod "${gomod}" is not "module version"`);
  const importPath = typeof entry.import === "string" ? entry.import : match[1];
  return { gomod, module: match[1], version: match[2], importPath };
}

export function loadBuilderConfig(): BuilderConfig {
  const root = record(
    parse(readFileSync(join(ROOT, "collector", BUILDER_CONFIG), "utf8")),
    BUILDER_CONFIG,
  );
  const dist = record(root.dist, "dist");
  const modules = (key: string): BuilderModule[] =>
    root[key] === undefined
      ? []
      : list(root[key], key).map((m, i) => builderModule(m, `${key}[${String(i)}]`));
  return {
    dist: {
      name: String(dist.name),
      module: String(dist.module),
      version: String(dist.version),
      outputPath: String(dist.output_path),
    },
    components: Object.fromEntries(COMPONENT_CLASSES.map((c) => [c, modules(c)])) as Record<
      ComponentClass,
      BuilderModule[]
    >,
    providers: modules("providers"),
    telemetry: builderModule(root.telemetry, "telemetry"),
    replaces: root.replaces === undefined ? [] : list(root.replaces, "replaces").map(String),
  };
}

export interface GoMod {
  module: string;
  go: string;
  /** Every require, direct and indirect: module -> version. */
  requires: Map<string, { version: string; indirect: boolean }>;
  /** `old => new version` (or `old version => new version`), spaces normalised. */
  replaces: string[];
}

/** A go.mod's module, go line, requires and replaces (the subset of the grammar ocb writes). */
export function parseGoMod(text: string): GoMod {
  const mod: GoMod = { module: "", go: "", requires: new Map(), replaces: [] };
  let block: string | undefined;
  for (const raw of text.split("\n")) {
    const indirect = /\/\/\s*indirect\b/.test(raw);
    const line = raw.replace(/\/\/.*$/, "").trim();
    if (line === "") continue;
    if (block !== undefined && line === ")") {
      block = undefined;
      continue;
    }
    let verb: string;
    let rest: string;
    if (block === undefined) {
      const m = /^(\w+)\s*(.*)$/.exec(line);
      verb = m?.[1] ?? "";
      rest = m?.[2] ?? "";
      if (rest === "(") {
        block = verb;
        continue;
      }
    } else {
      verb = block;
      rest = line;
    }
    const words = rest.split(/\s+/);
    if (verb === "module") mod.module = words[0] ?? "";
    else if (verb === "go") mod.go = words[0] ?? "";
    else if (verb === "require" && words[0] !== undefined && words[1] !== undefined)
      mod.requires.set(words[0], { version: words[1], indirect });
    else if (verb === "replace") mod.replaces.push(words.join(" "));
  }
  return mod;
}

export function loadGoMod(): GoMod {
  return parseGoMod(readFileSync(join(BUILD_DIR, "go.mod"), "utf8"));
}

/** The `alias "path"` imports of a Go file (alias: the explicit one, else the last element). */
export function goImports(text: string): Map<string, string> {
  const imports = new Map<string, string>();
  const blocks = [...text.matchAll(/^import\s*\(([\s\S]*?)^\)/gm)].map((m) => m[1] ?? "");
  const single = [...text.matchAll(/^import\s+((?:\w+\s+)?"[^"]+")\s*$/gm)].map((m) => m[1] ?? "");
  for (const line of [...blocks.flatMap((b) => b.split("\n")), ...single]) {
    const m = /^\s*(?:(\w+)\s+)?"([^"]+)"/.exec(line);
    if (m?.[2] === undefined) continue;
    imports.set(m[1] ?? m[2].split("/").pop() ?? m[2], m[2]);
  }
  return imports;
}

/** `otelcol.MakeFactoryMap[<kind>.Factory](a.NewFactory(), ...)` of components.go: kind -> aliases. */
export function factoryMaps(componentsGo: string): Map<string, string[]> {
  const maps = new Map<string, string[]>();
  for (const m of componentsGo.matchAll(/MakeFactoryMap\[(\w+)\.Factory\]\(([\s\S]*?)\n\s*\)/g)) {
    const aliases = [...(m[2] ?? "").matchAll(/(\w+)\.NewFactory\(\)/g)].map((a) => a[1] ?? "");
    maps.set(m[1] ?? "", aliases);
  }
  return maps;
}
