/**
 * Static checks of collector/*.yaml. No otelcol binary can run in this repository's CI, so what
 * can be known without one is checked here: the component ids exist in the pinned otelcol-contrib
 * release under their current names, the pipelines are wired (everything declared is used and
 * everything used is declared), memory_limiter comes first, exporters batch, the tail sampler
 * keeps what the telemetry contract says must be kept, no secret is written down, and every
 * variable is documented. Field names and types are left to `otelcol-contrib validate`
 * (collector/README.md).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as conventions from "../../src/telemetry/conventions.js";
import * as otelcol from "../fixtures/otelcol-contrib-components.js";
import {
  collectorEnvNames,
  durationSeconds,
  envRef,
  list,
  loadYaml,
  optionalRecord,
  record,
  ROOT,
  strings,
  walk,
  type YamlRecord,
} from "./config-files.js";

const CLASSES = {
  receivers: otelcol.receivers,
  processors: otelcol.processors,
  exporters: otelcol.exporters,
  connectors: otelcol.connectors,
  extensions: otelcol.extensions,
} as const;
type ComponentClass = keyof typeof CLASSES;
const CLASS_NAMES = Object.keys(CLASSES) as ComponentClass[];

// builder-config.yaml is the ocb manifest of the Collector binary (collector-build.test.ts), not a
// Collector configuration.
const FILES = readdirSync(join(ROOT, "collector"))
  .filter((f) => /\.ya?ml$/.test(f) && f !== "builder-config.yaml")
  .sort();
const README = readFileSync(join(ROOT, "collector", "README.md"), "utf8");

interface Pipeline {
  id: string;
  signal: string;
  receivers: string[];
  processors: string[];
  exporters: string[];
}

interface Collector {
  file: string;
  text: string;
  root: YamlRecord;
  sections: Record<ComponentClass, YamlRecord>;
  pipelines: Pipeline[];
  serviceExtensions: string[];
}

function loadCollector(file: string): Collector {
  const { text, root } = loadYaml(join("collector", file));
  const sections = Object.fromEntries(
    CLASS_NAMES.map((c) => [c, optionalRecord(root[c], `${file} ${c}`)]),
  ) as Record<ComponentClass, YamlRecord>;
  const service = record(root.service, `${file} service`);
  const pipelines = Object.entries(record(service.pipelines, `${file} service.pipelines`)).map(
    ([id, value]): Pipeline => {
      const p = record(value, `${file} pipeline ${id}`);
      return {
        id,
        signal: id.split("/")[0] ?? "",
        receivers: strings(p.receivers, `${file} ${id}.receivers`),
        processors: p.processors === undefined ? [] : strings(p.processors, `${id}.processors`),
        exporters: strings(p.exporters, `${file} ${id}.exporters`),
      };
    },
  );
  const serviceExtensions =
    service.extensions === undefined ? [] : strings(service.extensions, `${file} extensions`);
  return { file, text, root, sections, pipelines, serviceExtensions };
}

const COLLECTORS = FILES.map(loadCollector);

/** `span_metrics/x` -> `span_metrics`. */
function typeOf(id: string): string {
  return id.split("/")[0] ?? id;
}

function ofType(section: YamlRecord, type: string): [string, YamlRecord][] {
  return Object.entries(section)
    .filter(([id]) => typeOf(id) === type)
    .map(([id, value]) => [id, optionalRecord(value, id)]);
}

/** Every span attribute and span name the contract defines (src/telemetry/conventions.ts). */
const ATTRIBUTE_KEYS = new Set(
  Object.entries(conventions)
    .filter(([name, value]) => name.startsWith("ATTR_") && typeof value === "string")
    .map(([, value]) => value as string),
);

const SECRET_NAME = /(pass(word)?|secret|token|api[-_]?key|authori[sz]ation|bearer|team)/i;

it("finds the collector configurations", () => {
  expect(FILES).toEqual(
    expect.arrayContaining([
      "grafana.yaml",
      "honeycomb.yaml",
      "local.yaml",
      "tier1-loadbalancer.yaml",
    ]),
  );
});

describe.each(COLLECTORS.map((c) => [c.file, c] as const))("collector/%s", (_, c) => {
  it(`uses only component types of otelcol-contrib ${otelcol.OTELCOL_CONTRIB_RELEASE}, by their current names`, () => {
    for (const cls of CLASS_NAMES) {
      const known = CLASSES[cls];
      const deprecated = new Map(
        Object.entries(known).flatMap(([type, info]) =>
          info.deprecated === undefined ? [] : [[info.deprecated, type]],
        ),
      );
      for (const id of Object.keys(c.sections[cls])) {
        expect(id, `${cls} id ${id}`).toMatch(/^[a-z0-9_]+(\/[A-Za-z0-9_.-]+)?$/);
        const type = typeOf(id);
        expect(
          deprecated.get(type),
          `${cls}: "${type}" is the deprecated alias of "${deprecated.get(type) ?? ""}"`,
        ).toBeUndefined();
        expect(Object.keys(known), `${cls}: "${type}" is not a component of the release`).toContain(
          type,
        );
      }
    }
  });

  it("declares every component it uses and uses every component it declares", () => {
    const { receivers, processors, exporters, connectors, extensions } = c.sections;
    expect(c.pipelines.length).toBeGreaterThan(0);
    const usedAs = {
      receiver: new Set<string>(),
      processor: new Set<string>(),
      exporter: new Set<string>(),
    };
    for (const p of c.pipelines) {
      expect(p.id).toMatch(/^(traces|metrics|logs|profiles)(\/[A-Za-z0-9_.-]+)?$/);
      expect(p.receivers.length, `${p.id} has no receiver`).toBeGreaterThan(0);
      expect(p.exporters.length, `${p.id} has no exporter`).toBeGreaterThan(0);
      for (const id of p.receivers) {
        expect(id in receivers || id in connectors, `${p.id}: receiver ${id} is not declared`).toBe(
          true,
        );
        usedAs.receiver.add(id);
      }
      for (const id of p.processors) {
        expect(id in processors, `${p.id}: processor ${id} is not declared`).toBe(true);
        usedAs.processor.add(id);
      }
      for (const id of p.exporters) {
        expect(id in exporters || id in connectors, `${p.id}: exporter ${id} is not declared`).toBe(
          true,
        );
        usedAs.exporter.add(id);
      }
    }
    for (const id of Object.keys(receivers))
      expect(usedAs.receiver, `unused receiver ${id}`).toContain(id);
    for (const id of Object.keys(processors))
      expect(usedAs.processor, `unused processor ${id}`).toContain(id);
    for (const id of Object.keys(exporters))
      expect(usedAs.exporter, `unused exporter ${id}`).toContain(id);
    for (const id of Object.keys(connectors)) {
      expect(usedAs.exporter, `connector ${id} is fed by no pipeline`).toContain(id);
      expect(usedAs.receiver, `connector ${id} feeds no pipeline`).toContain(id);
    }
    expect([...c.serviceExtensions].sort()).toEqual(Object.keys(extensions).sort());
    for (const { path, key, value } of walk(c.root)) {
      if (key !== "authenticator") continue;
      expect(c.serviceExtensions, `${path.join(".")} names an extension not started`).toContain(
        value,
      );
    }
  });

  it("puts memory_limiter first in every pipeline", () => {
    for (const p of c.pipelines) {
      expect(
        typeOf(p.processors[0] ?? ""),
        `${p.id} starts with ${p.processors[0] ?? "nothing"}`,
      ).toBe("memory_limiter");
    }
  });

  it("batches in the exporters (sending_queue.batch), not in the batch processor", () => {
    expect(ofType(c.sections.processors, "batch")).toEqual([]);
    const expectBatching = (queue: unknown, where: string): void => {
      const q = record(queue, `${where}.sending_queue`);
      expect(q.enabled, `${where}: queue disabled`).not.toBe(false);
      const batch = record(q.batch, `${where}.sending_queue.batch`);
      expect(
        durationSeconds(String(batch.flush_timeout)),
        `${where} flush_timeout`,
      ).toBeGreaterThan(0);
      expect(["items", "bytes"]).toContain(batch.sizer);
      expect(typeof batch.min_size === "number" && batch.min_size > 0, `${where} min_size`).toBe(
        true,
      );
      expect(
        typeof batch.max_size === "number" && batch.max_size >= Number(batch.min_size),
        `${where} max_size`,
      ).toBe(true);
    };
    for (const [id, cfg] of Object.entries(c.sections.exporters)) {
      const exporter = optionalRecord(cfg, id);
      switch (typeOf(id)) {
        case "otlp_grpc":
        case "otlp_http":
          expectBatching(exporter.sending_queue, id);
          break;
        case "load_balancing": {
          const otlp = record(
            record(exporter.protocol, `${id}.protocol`).otlp,
            `${id}.protocol.otlp`,
          );
          expectBatching(otlp.sending_queue, `${id}.protocol.otlp`);
          break;
        }
        case "prometheus_remote_write": {
          // No sending_queue in this exporter: its own queue, and requests split by size.
          const queue = record(exporter.remote_write_queue, `${id}.remote_write_queue`);
          expect(queue.enabled).toBe(true);
          expect(exporter.max_batch_size_bytes).toBeGreaterThan(0);
          break;
        }
        default:
          throw new Error(`${id}: add its batching settings to this test`);
      }
    }
  });

  it("writes no secret: headers, auth and keys come from ${env:...}", () => {
    for (const { path, key, value } of walk(c.root)) {
      const where = path.join(".");
      const parent = path[path.length - 2];
      if (parent === "headers") {
        const ref = envRef(value);
        expect(ref, `${where} must be \${env:NAME}`).toBeDefined();
        if (SECRET_NAME.test(key)) expect(ref?.fallback, `${where} has a default`).toBeUndefined();
      }
      if (parent === "client_auth" || (SECRET_NAME.test(key) && typeof value === "string")) {
        const ref = envRef(value);
        expect(ref, `${where} must be \${env:NAME}`).toBeDefined();
        expect(ref?.fallback, `${where}: a credential has no default`).toBeUndefined();
      }
      if (typeof value === "string") {
        expect(value, `${where}: credentials in a URL`).not.toMatch(/:\/\/[^/\s@]+:[^/\s@]+@/);
        if (envRef(value) === undefined) {
          expect(value, `${where} looks like a token`).not.toMatch(
            /^(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[A-Za-z0-9+/_-]{24,}={0,2}$/,
          );
        }
      }
    }
  });

  it("documents every environment variable it reads in collector/README.md", () => {
    const names = collectorEnvNames(c.text);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      expect(README, `${name} is not in the README's variables table`).toMatch(
        new RegExp(`^\\| \`${name}\` +\\|`, "m"),
      );
    }
    // Only the env provider, never a bare ${NAME} (deprecated) or $NAME.
    expect(c.text.replace(/\$\{env:[^}]+\}/g, "")).not.toMatch(/\$\{?[A-Za-z_]/);
  });

  it("never uses invert_match (a drop policy says what to drop)", () => {
    for (const { path, key } of walk(c.root)) expect(key, path.join(".")).not.toBe("invert_match");
  });

  it("is described in the README, one section per pipeline", () => {
    expect(README).toContain(`\`${c.file}\``);
    for (const p of c.pipelines) expect(README).toMatch(new RegExp(`^### \`${p.id}\`$`, "m"));
  });
});

const SAMPLING = COLLECTORS.filter(
  (c) => ofType(c.sections.processors, "tail_sampling").length > 0,
);

describe.each(SAMPLING.map((c) => [c.file, c] as const))(
  "collector/%s: sampling and span metrics",
  (_, c) => {
    // Every tail_sampling instance (honeycomb.yaml runs two: one keeps what must be kept, the
    // other samples the rest), each with its own policies.
    const samplers = ofType(c.sections.processors, "tail_sampling").map(([id, cfg]) => ({
      id,
      cfg,
      policies: list(cfg.policies, `${id}.policies`).map((p, i) =>
        record(p, `${id} policy ${String(i)}`),
      ),
    }));
    const policies = samplers.flatMap((s) => s.policies);
    const policyOfType = (type: string): YamlRecord[] => policies.filter((p) => p.type === type);

    it("keeps every trace with an error", () => {
      const codes = policyOfType("status_code").flatMap((p) =>
        strings(record(p.status_code, "status_code").status_codes, "status_codes"),
      );
      expect(codes).toContain("ERROR");
    });

    it(`keeps every trace containing an ${conventions.SPAN_DIAGNOSIS} or ${conventions.SPAN_RECOVERY} span`, () => {
      const conditions = policyOfType("ottl_condition").flatMap((p) =>
        strings(record(p.ottl_condition, "ottl_condition").span, "ottl_condition.span"),
      );
      for (const name of [conventions.SPAN_DIAGNOSIS, conventions.SPAN_RECOVERY]) {
        expect(conditions).toContain(`span.name == "${name}"`);
      }
    });

    it(`keeps every trace of the watchdog at work (${conventions.SPAN_WATCHDOG_RECOVERY}, a ${conventions.SPAN_WATCHDOG_VERDICT} other than healthy)`, () => {
      const conditions = policyOfType("ottl_condition").flatMap((p) =>
        strings(record(p.ottl_condition, "ottl_condition").span, "ottl_condition.span"),
      );
      expect(conditions).toContain(`span.name == "${conventions.SPAN_WATCHDOG_RECOVERY}"`);
      expect(conditions).toContain(
        `span.name == "${conventions.SPAN_WATCHDOG_VERDICT}" and span.attributes["${conventions.ATTR_WATCHDOG_VERDICT}"] != "healthy"`,
      );
    });

    it("decides a trace after its root span, waiting long for a late error (both from env)", () => {
      for (const { id, cfg } of samplers) {
        const wait = envRef(cfg.decision_wait);
        const afterRoot = envRef(cfg.decision_wait_after_root_received);
        expect(wait?.name, id).toBe("SELFHEAL_TRACE_DECISION_WAIT");
        expect(afterRoot?.name, id).toBe("SELFHEAL_TRACE_DECISION_WAIT_AFTER_ROOT");
        expect(durationSeconds(wait?.fallback ?? "0s"), id).toBeGreaterThanOrEqual(300);
        expect(durationSeconds(afterRoot?.fallback ?? "0s"), id).toBeGreaterThan(0);
      }
    });

    it("keeps a configurable share of the rest, from an env var with a default", () => {
      const [probabilistic, ...more] = policyOfType("probabilistic");
      expect(more).toEqual([]);
      const ref = envRef(record(probabilistic?.probabilistic, "probabilistic").sampling_percentage);
      expect(ref?.name).toBe("SELFHEAL_TRACE_SAMPLE_PERCENT");
      const fallback = Number(ref?.fallback);
      expect(fallback >= 0 && fallback <= 100, `default ${String(ref?.fallback)}`).toBe(true);
    });

    it("gives each drop policy its sub-policies and names every policy once", () => {
      for (const drop of policyOfType("drop")) {
        expect(
          list(record(drop.drop, "drop").drop_sub_policy, "drop_sub_policy").length,
        ).toBeGreaterThan(0);
      }
      for (const sampler of samplers) {
        const names = sampler.policies.map((p) => p.name);
        expect(new Set(names).size, sampler.id).toBe(names.length);
      }
    });

    it("samples in traces pipelines only, and every traces pipeline to a backend samples", () => {
      const connectorIds = new Set(Object.keys(c.sections.connectors));
      for (const p of c.pipelines) {
        const samples = p.processors.some((id) => typeOf(id) === "tail_sampling");
        if (p.signal !== "traces") expect(samples, p.id).toBe(false);
        const toBackend = p.exporters.some((id) => !connectorIds.has(id));
        if (p.signal === "traces" && toBackend)
          expect(samples, `${p.id} exports unsampled traces`).toBe(true);
      }
    });

    it("feeds span_metrics from an unsampled traces pipeline, and its output to a metrics pipeline", () => {
      const spanMetrics = ofType(c.sections.connectors, "span_metrics").map(([id]) => id);
      expect(spanMetrics.length).toBeGreaterThan(0);
      const sampled = c.pipelines.filter((p) =>
        p.processors.some((id) => typeOf(id) === "tail_sampling"),
      );
      for (const id of spanMetrics) {
        const feeders = c.pipelines.filter((p) => p.exporters.includes(id));
        expect(feeders.length).toBeGreaterThan(0);
        for (const p of feeders) {
          expect(p.signal).toBe("traces");
          // Nothing that drops spans before the connector: it must count every span.
          expect(p.processors.map(typeOf), p.id).toEqual(["memory_limiter"]);
          // It sees every span the sampler sees.
          for (const s of sampled) expect(p.receivers.sort()).toEqual([...s.receivers].sort());
        }
        const fed = c.pipelines.filter((p) => p.receivers.includes(id));
        expect(fed.map((p) => p.signal)).toEqual(expect.arrayContaining(["metrics"]));
        expect(fed.every((p) => p.signal === "metrics")).toBe(true);
      }
    });

    it("builds span metrics on contract attributes, with the contract's duration buckets", () => {
      for (const [id, cfg] of ofType(c.sections.connectors, "span_metrics")) {
        const dimensions = list(cfg.dimensions, `${id}.dimensions`).map(
          (d, i) => record(d, `${id}.dimensions[${String(i)}]`).name,
        );
        expect(dimensions.length).toBeGreaterThan(0);
        for (const name of dimensions) {
          expect(ATTRIBUTE_KEYS, `${String(name)} is not an attribute of the contract`).toContain(
            name,
          );
        }
        const histogram = record(cfg.histogram, `${id}.histogram`);
        expect(histogram.unit).toBe("s");
        const buckets = strings(record(histogram.explicit, "explicit").buckets, "buckets").map(
          durationSeconds,
        );
        expect(buckets.map((b) => Math.round(b * 1000) / 1000)).toEqual(
          conventions.DURATION_BUCKETS_SECONDS,
        );
      }
    });
  },
);

describe("collector/tier1-loadbalancer.yaml", () => {
  const c = COLLECTORS.find((x) => x.file === "tier1-loadbalancer.yaml");
  if (c === undefined) throw new Error("tier1-loadbalancer.yaml is missing");
  const balancers = ofType(c.sections.exporters, "load_balancing");

  it("routes every span of a trace to one second-tier Collector by trace ID, and samples nothing", () => {
    expect(ofType(c.sections.processors, "tail_sampling")).toEqual([]);
    const traces = c.pipelines.filter((p) => p.signal === "traces");
    expect(traces.length).toBeGreaterThan(0);
    for (const p of traces) {
      for (const id of p.exporters) {
        expect(typeOf(id), `${p.id} -> ${id}`).toBe("load_balancing");
        expect(record(c.sections.exporters[id], id).routing_key).toBe("traceID");
      }
    }
  });

  it("gives each load_balancing exporter one resolver and leaves the backend endpoint to it", () => {
    expect(balancers.length).toBeGreaterThan(0);
    for (const [id, cfg] of balancers) {
      expect(Object.keys(record(cfg.resolver, `${id}.resolver`))).toHaveLength(1);
      const otlp = record(record(cfg.protocol, `${id}.protocol`).otlp, `${id}.protocol.otlp`);
      expect(otlp.endpoint, `${id}: protocol.otlp.endpoint is set per backend`).toBeUndefined();
    }
  });
});

describe("collector/README.md", () => {
  it(`names the release the files were written against (${otelcol.OTELCOL_CONTRIB_RELEASE}) and how to validate them`, () => {
    expect(README).toContain(`otelcol-contrib ${otelcol.OTELCOL_CONTRIB_RELEASE}`);
    expect(README).toContain("otelcol-contrib validate --config collector/");
    // The image the compose stack runs: the release the tests build (builder-config.yaml).
    expect(README).toContain("opentelemetry-collector-contrib:0.161.0");
  });

  it("documents only variables that a configuration reads", () => {
    const used = new Set(
      COLLECTORS.flatMap((c) => collectorEnvNames(c.text)).concat(
        // Compose interpolation of the local stack.
        [
          ...readFileSync(join(ROOT, "docker-compose.yml"), "utf8").matchAll(/\$\{([A-Z0-9_]+)/g),
        ].map((m) => m[1] ?? ""),
      ),
    );
    const section = README.split(/^## Environment variables$/m)[1]?.split(/^## /m)[0] ?? "";
    const documented = [...section.matchAll(/^\| `([A-Z0-9_]+)` +\|/gm)].map((m) => m[1] ?? "");
    expect(documented.length).toBeGreaterThan(0);
    for (const name of documented) expect(used, `${name} is documented but unused`).toContain(name);
  });
});

describe(`the pinned otelcol-contrib ${otelcol.OTELCOL_CONTRIB_RELEASE} component list`, () => {
  it("maps each type to its own module, and no alias shadows a current type", () => {
    for (const cls of CLASS_NAMES) {
      const entries = Object.entries(CLASSES[cls]);
      const modules = entries.map(([, t]) => t.module);
      expect(new Set(modules).size, cls).toBe(modules.length);
      for (const [, t] of entries) {
        if (t.deprecated !== undefined)
          expect(Object.keys(CLASSES[cls]), cls).not.toContain(t.deprecated);
      }
    }
  });
});
