/**
 * collector/builder-config.yaml (the ocb manifest) and collector/build/ (the sources ocb generates
 * from it, committed so that `go build` needs no ocb) describe the same Collector: every module at
 * one release, every manifest module required in go.mod at its version and its factory registered
 * in components.go (or main.go for the confmap providers), nothing registered that the manifest
 * does not list, and every component type collector/*.yaml uses built in. Needs no Go.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import * as otelcol from "../fixtures/otelcol-contrib-components.js";
import {
  BUILD_DIR,
  COMPONENT_CLASSES,
  collectorConfigFiles,
  factoryMaps,
  goImports,
  loadBuilderConfig,
  loadGoMod,
  type BuilderModule,
  type ComponentClass,
} from "./collector-dist.js";
import { loadYaml, optionalRecord, ROOT } from "./config-files.js";

const CONFIG = loadBuilderConfig();
const GO_MOD = loadGoMod();
const GO_SUM = readFileSync(join(BUILD_DIR, "go.sum"), "utf8");
const MAIN_GO = readFileSync(join(BUILD_DIR, "main.go"), "utf8");
const COMPONENTS_GO = readFileSync(join(BUILD_DIR, "components.go"), "utf8");

const CONTRIB = "github.com/open-telemetry/opentelemetry-collector-contrib/";
const CORE = "go.opentelemetry.io/collector/";
/** components.go registers each class with MakeFactoryMap[<kind>.Factory]. */
const KIND: Record<ComponentClass, string> = {
  receivers: "receiver",
  processors: "processor",
  exporters: "exporter",
  connectors: "connector",
  extensions: "extension",
};

const COMPONENTS = COMPONENT_CLASSES.flatMap((cls) =>
  CONFIG.components[cls].map((m) => ({ cls, ...m })),
);
const ALL_MODULES: BuilderModule[] = [...COMPONENTS, ...CONFIG.providers, CONFIG.telemetry];
const RELEASE = GO_MOD.requires.get(`${CORE}otelcol`)?.version;

const isCollectorModule = (path: string): boolean =>
  path.startsWith(CONTRIB) || path.startsWith(CORE);

describe("collector/builder-config.yaml", () => {
  it("builds a named distribution into collector/build/", () => {
    expect(CONFIG.dist.name).toMatch(/^[a-z][a-z0-9-]*$/);
    expect(resolve(ROOT, "collector", CONFIG.dist.outputPath)).toBe(resolve(BUILD_DIR));
    expect(CONFIG.dist.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("pins every collector module to one release (0.x and the matching 1.x)", () => {
    expect(RELEASE, "go.mod requires go.opentelemetry.io/collector/otelcol").toMatch(
      /^v0\.\d+\.\d+$/,
    );
    const stable = new Set<string>();
    const check = (path: string, version: string, where: string): void => {
      if (version.startsWith("v1.")) stable.add(version);
      else expect(version, `${where}: ${path}`).toBe(RELEASE);
    };
    for (const m of ALL_MODULES) check(m.module, m.version, "builder-config.yaml");
    for (const [path, { version }] of GO_MOD.requires) {
      if (isCollectorModule(path)) check(path, version, "go.mod");
    }
    expect([...stable], "one 1.x release of the stable core modules").toHaveLength(1);
    // The 1.x release cut with the 0.x one (v0.161.0 with v1.67.0, v0.165.0 with v1.71.0).
    const minor = Number(RELEASE?.split(".")[1]);
    expect([...stable][0]).toBe(`v1.${String(minor - 94)}.0`);
    for (const p of CONFIG.providers) expect(p.version, p.module).toMatch(/^v1\./);
  });
});

describe("collector/build/ (what ocb generates from builder-config.yaml)", () => {
  it("is the manifest's module, for a Go this machine has (go.mod's go line)", () => {
    expect(GO_MOD.module).toBe(CONFIG.dist.module);
    expect(GO_MOD.go).toMatch(/^1\.\d+(\.\d+)?$/);
  });

  it("requires every module of the manifest in go.mod, at the manifest's version", () => {
    for (const m of ALL_MODULES) {
      const req = GO_MOD.requires.get(m.module);
      expect(req?.version, `go.mod: ${m.module}`).toBe(m.version);
      expect(req?.indirect, `go.mod: ${m.module} is a direct requirement`).toBe(false);
    }
  });

  it("has every required module in go.sum, and the manifest's replaces in go.mod", () => {
    const norm = (r: string): string => r.trim().split(/\s+/).join(" ");
    expect(GO_MOD.replaces.map(norm).sort()).toEqual(CONFIG.replaces.map(norm).sort());
    // `old => new version`: go.sum holds the replacement.
    const replaced = new Map(
      GO_MOD.replaces.map((r) => {
        const [from = "", to = ""] = r.split("=>").map((side) => side.trim());
        return [from.split(" ")[0] ?? "", to.split(/\s+/).join(" ")];
      }),
    );
    const summed = new Set(GO_SUM.split("\n").map((line) => line.replace(/\/go\.mod h1:.*$/, "")));
    const missing = [...GO_MOD.requires]
      .map(([path, { version }]) => replaced.get(path) ?? `${path} ${version}`)
      .filter((module) => !summed.has(module));
    expect(missing, "go.mod requirements without a go.sum line").toEqual([]);
  });

  it("imports each component's factory package in components.go and registers it in its class", () => {
    const imports = goImports(COMPONENTS_GO);
    const maps = factoryMaps(COMPONENTS_GO);
    for (const m of COMPONENTS) {
      const alias = [...imports].find(([, path]) => path === m.importPath)?.[0];
      expect(alias, `components.go imports ${m.importPath}`).toBeDefined();
      expect(maps.get(KIND[m.cls]), `${m.cls}: ${m.importPath}`).toContain(alias);
      expect(COMPONENTS_GO, `${m.importPath}: module recorded`).toContain(
        `${String(alias)}.NewFactory().Type(): "${m.gomod}"`,
      );
    }
    const telemetry = [...imports].find(([, path]) => path === CONFIG.telemetry.importPath)?.[0];
    expect(telemetry, `components.go imports ${CONFIG.telemetry.importPath}`).toBeDefined();
    expect(COMPONENTS_GO).toContain(`Telemetry: ${String(telemetry)}.NewFactory()`);
  });

  it("registers no component the manifest does not list", () => {
    const imports = goImports(COMPONENTS_GO);
    for (const cls of COMPONENT_CLASSES) {
      const registered = (factoryMaps(COMPONENTS_GO).get(KIND[cls]) ?? []).map((alias) =>
        imports.get(alias),
      );
      expect(registered.sort(), cls).toEqual(
        CONFIG.components[cls].map((m) => m.importPath).sort(),
      );
    }
  });

  it("registers the manifest's confmap providers, name and version in main.go", () => {
    const imports = goImports(MAIN_GO);
    const block = /ProviderFactories: \[\]confmap\.ProviderFactory\{([\s\S]*?)\}/.exec(
      MAIN_GO,
    )?.[1];
    const registered = [...(block ?? "").matchAll(/(\w+)\.NewFactory\(\)/g)].map((m) =>
      imports.get(m[1] ?? ""),
    );
    expect(registered.sort()).toEqual(CONFIG.providers.map((p) => p.importPath).sort());
    expect(CONFIG.providers.map((p) => p.module.split("/").pop()).sort()).toEqual(
      expect.arrayContaining(["envprovider", "fileprovider", "yamlprovider"]),
    );
    expect(MAIN_GO).toContain(`Command:     "${CONFIG.dist.name}"`);
    expect(MAIN_GO).toContain(`Version:     "${CONFIG.dist.version}"`);
    expect(MAIN_GO).toContain("otelcol.NewCommand(");
  });
});

describe("the distribution runs collector/*.yaml", () => {
  const CLASSES = {
    receivers: otelcol.receivers,
    processors: otelcol.processors,
    exporters: otelcol.exporters,
    connectors: otelcol.connectors,
    extensions: otelcol.extensions,
  };
  const modulePath = (m: string): string => (m.includes(".") ? m : `${CONTRIB}${m}`);

  it.each(collectorConfigFiles())("has a component for every type collector/%s uses", (file) => {
    const { root } = loadYaml(join("collector", file));
    for (const cls of COMPONENT_CLASSES) {
      const built = CONFIG.components[cls].map((m) => m.module);
      for (const id of Object.keys(optionalRecord(root[cls], `${file} ${cls}`))) {
        const type = id.split("/")[0] ?? id;
        const known = CLASSES[cls][type];
        expect(known, `${cls}: "${type}" is not in the pinned component list`).toBeDefined();
        expect(
          built,
          `${file}: ${cls} "${type}" (${modulePath(known?.module ?? "")}) is not in builder-config.yaml`,
        ).toContain(modulePath(known?.module ?? ""));
      }
    }
  });
});
