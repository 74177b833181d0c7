/**
 * Static checks of the local observability stack: docker-compose.yml, prometheus/prometheus.yml
 * and how they meet collector/local.yaml, alerts/, grafana/provisioning/ and dashboards/. Docker
 * does not run in CI; what would break `docker compose up` without a message (a missing bind
 * mount, an unpinned image, a rule file that is not read, a service name typed wrong) is caught
 * here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import { loadBuilderConfig } from "./collector-dist.js";
import {
  composeEnvNames,
  isRecord,
  list,
  loadYaml,
  optionalRecord,
  record,
  ROOT,
  strings,
  withDefault,
  type YamlRecord,
} from "./config-files.js";

const compose = loadYaml("docker-compose.yml");
const services = record(compose.root.services, "services");
const namedVolumes = new Set(Object.keys(optionalRecord(compose.root.volumes, "volumes")));
const README = readFileSync(join(ROOT, "collector", "README.md"), "utf8");

interface Mount {
  source: string;
  target: string;
  bind: boolean;
}

function mounts(service: YamlRecord, name: string): Mount[] {
  if (service.volumes === undefined) return [];
  return list(service.volumes, `${name}.volumes`).map((v): Mount => {
    if (typeof v === "string") {
      const [source = "", target = ""] = v.split(":");
      return { source, target, bind: /^[./~]/.test(source) };
    }
    const m = record(v, `${name}.volumes[]`);
    return { source: String(m.source), target: String(m.target), bind: m.type === "bind" };
  });
}

function service(name: string): YamlRecord {
  return record(services[name], `service ${name}`);
}

/** Where a repository path is mounted in a service. */
function targetOf(serviceName: string, source: string): string {
  const found = mounts(service(serviceName), serviceName).find(
    (m) => m.bind && posix.normalize(m.source) === posix.normalize(source),
  );
  if (found === undefined) throw new Error(`${serviceName} does not mount ${source}`);
  return found.target;
}

function command(name: string): string[] {
  const value = service(name).command;
  return typeof value === "string" ? value.split(/\s+/) : strings(value, `${name}.command`);
}

/** The host of `host:port` or of a URL. */
function hostOf(address: string): string {
  const url = /^[a-z]+:\/\//.test(address) ? new URL(address) : new URL(`tcp://${address}`);
  return url.hostname;
}

/** Files of a directory of the repository whose names match a shell glob with `*` only. */
function globFiles(dir: string, pattern: string): string[] {
  const re = new RegExp(
    `^${pattern
      .split("*")
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join("[^/]*")}$`,
  );
  return existsSync(join(ROOT, dir)) ? readdirSync(join(ROOT, dir)).filter((f) => re.test(f)) : [];
}

function yamlFilesIn(dir: string): string[] {
  return existsSync(join(ROOT, dir))
    ? readdirSync(join(ROOT, dir))
        .filter((f) => /\.ya?ml$/.test(f))
        .map((f) => posix.join(dir, f))
    : [];
}

describe("docker-compose.yml", () => {
  it("runs the Collector, Prometheus, Alertmanager, Tempo and Grafana", () => {
    expect(Object.keys(services).sort()).toEqual([
      "alertmanager",
      "grafana",
      "otel-collector",
      "prometheus",
      "tempo",
    ]);
  });

  it.each(Object.keys(services))("pins the image of %s to an exact version", (name) => {
    const image = service(name).image;
    expect(typeof image, `${name} has no image`).toBe("string");
    const [, tag = ""] =
      /^[a-z0-9./-]+:([A-Za-z0-9._-]+)(@sha256:[a-f0-9]{64})?$/.exec(String(image)) ?? [];
    expect(tag, String(image)).toMatch(/^v?\d+\.\d+\.\d+$/);
    expect(service(name).build).toBeUndefined();
  });

  it("runs the otelcol-contrib release the tests build and run the configurations on", () => {
    // collector/builder-config.yaml: the distribution scripts/build-collector.sh builds.
    const release = loadBuilderConfig().dist.version;
    const contrib = loadBuilderConfig().components.processors.find((m) =>
      m.module.includes("opentelemetry-collector-contrib"),
    );
    expect(contrib?.version).toBe(`v${release}`);
    expect(service("otel-collector").image).toBe(`otel/opentelemetry-collector-contrib:${release}`);
  });

  it.each(Object.keys(services))(
    "%s bind-mounts only paths that exist in the repository",
    (name) => {
      for (const m of mounts(service(name), name)) {
        if (m.bind) {
          expect(m.source, `${name}: bind mounts are relative to the repository`).toMatch(/^\.\//);
          expect(existsSync(join(ROOT, m.source)), `${name}: ${m.source} does not exist`).toBe(
            true,
          );
        } else {
          expect(namedVolumes, `${name}: volume ${m.source} is not declared`).toContain(m.source);
        }
        expect(m.target, `${name}: ${m.source}`).toMatch(/^\//);
      }
    },
  );

  it.each(Object.keys(services))("%s publishes its ports on 127.0.0.1 only", (name) => {
    const ports =
      service(name).ports === undefined ? [] : list(service(name).ports, `${name}.ports`);
    for (const p of ports) expect(String(p)).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it("starts the Collector on collector/local.yaml", () => {
    const target = targetOf("otel-collector", "./collector/local.yaml");
    expect(command("otel-collector")).toContain(`--config=${target}`);
  });

  it("starts Prometheus with its OTLP receiver, prometheus/prometheus.yml and alerts/", () => {
    const args = command("prometheus");
    expect(args).toContain("--web.enable-otlp-receiver");
    expect(args).toContain(
      `--config.file=${targetOf("prometheus", "./prometheus/prometheus.yml")}`,
    );
    targetOf("prometheus", "./alerts");
  });

  it("starts Tempo on tempo/tempo.yaml", () => {
    expect(command("tempo")).toContain(`-config.file=${targetOf("tempo", "./tempo/tempo.yaml")}`);
  });

  it("gives Grafana its data sources and dashboards/, and no alerting provisioning", () => {
    expect(targetOf("grafana", "./grafana/provisioning/datasources")).toBe(
      "/etc/grafana/provisioning/datasources",
    );
    expect(targetOf("grafana", "./grafana/provisioning/dashboards")).toBe(
      "/etc/grafana/provisioning/dashboards",
    );
    targetOf("grafana", "./dashboards");
    // One alerting path (Prometheus -> Alertmanager): Grafana gets no rules, contact points or
    // policies, so an alert neither shows twice nor notifies twice.
    for (const m of mounts(service("grafana"), "grafana")) {
      expect(m.target, m.source).not.toMatch(/^\/etc\/grafana\/provisioning\/?(alerting.*)?$/);
      expect(posix.normalize(m.source), m.target).not.toMatch(/^grafana\/alerting/);
    }
    expect(existsSync(join(ROOT, "grafana", "provisioning", "alerting"))).toBe(false);
  });

  it("starts Alertmanager on alertmanager/alertmanager.yml, with its state on a volume", () => {
    const args = command("alertmanager");
    expect(args).toContain(
      `--config.file=${targetOf("alertmanager", "./alertmanager/alertmanager.yml")}`,
    );
    const storage = args.find((a) => a.startsWith("--storage.path="))?.split("=")[1];
    const volume = mounts(service("alertmanager"), "alertmanager").find((m) => !m.bind);
    expect(volume?.target).toBe(storage);
  });

  it("documents the variables it reads in collector/README.md", () => {
    for (const name of composeEnvNames(compose.text)) {
      expect(README).toMatch(new RegExp(`^\\| \`${name}\` +\\|`, "m"));
    }
  });
});

describe("prometheus/prometheus.yml", () => {
  const prometheus = loadYaml("prometheus/prometheus.yml").root;
  const patterns = strings(prometheus.rule_files, "rule_files");

  it("reads its rule files from the mounted alerts/ directory", () => {
    expect(patterns.length).toBeGreaterThan(0);
    const alertsTarget = targetOf("prometheus", "./alerts");
    for (const p of patterns) expect(posix.dirname(p), p).toBe(alertsTarget);
  });

  it("reads every rule file of alerts/ and nothing else (not the promtool tests)", () => {
    const matched = new Set(patterns.flatMap((p) => globFiles("alerts", posix.basename(p))));
    for (const file of matched) {
      const root = loadYaml(posix.join("alerts", file)).root;
      expect(Array.isArray(root.groups), `alerts/${file} has no groups`).toBe(true);
      expect(root.tests, `alerts/${file} is a promtool test file`).toBeUndefined();
    }
    for (const path of yamlFilesIn("alerts")) {
      const root = loadYaml(path).root;
      if (Array.isArray(root.groups))
        expect(matched, `${path} is not loaded`).toContain(posix.basename(path));
    }
  });

  it("renders OTLP metric names as the other paths do and promotes resource attributes", () => {
    const otlp = record(prometheus.otlp, "otlp");
    // Counters get _total and histograms their unit, as from the JS Prometheus exporter.
    expect(otlp.translation_strategy).toBe("UnderscoreEscapingWithSuffixes");
    expect(
      strings(otlp.promote_resource_attributes, "promote_resource_attributes").length,
    ).toBeGreaterThan(0);
  });

  it("sends alerts to the stack's Alertmanager, on the port it listens on", () => {
    const alerting = record(prometheus.alerting, "alerting");
    const targets = list(alerting.alertmanagers, "alertmanagers").flatMap((am) =>
      list(record(am, "alertmanager").static_configs, "static_configs").flatMap((sc) =>
        strings(record(sc, "static_config").targets, "targets"),
      ),
    );
    expect(targets).toEqual(["alertmanager:9093"]);
    const ports = list(service("alertmanager").ports, "alertmanager.ports").map(String);
    expect(ports.map((p) => p.split(":").pop())).toContain("9093");
    expect(list(service("prometheus").depends_on, "depends_on")).toContain("alertmanager");
  });

  it("scrapes only services of the stack", () => {
    const jobs = list(prometheus.scrape_configs, "scrape_configs").map((j) => record(j, "job"));
    for (const job of jobs) {
      for (const sc of list(job.static_configs, "static_configs")) {
        for (const target of strings(record(sc, "static_config").targets, "targets")) {
          const host = hostOf(target);
          if (host !== "localhost")
            expect(Object.keys(services), `${String(job.job_name)}: ${target}`).toContain(host);
        }
      }
    }
  });
});

describe("collector/local.yaml in the stack", () => {
  const local = loadYaml("collector/local.yaml").root;

  it("exports to services of the stack", () => {
    const exporters = record(local.exporters, "exporters");
    expect(Object.keys(exporters).length).toBeGreaterThan(0);
    for (const [id, value] of Object.entries(exporters)) {
      const endpoint = withDefault(record(value, id).endpoint);
      expect(typeof endpoint, `${id}.endpoint`).toBe("string");
      expect(Object.keys(services), id).toContain(hostOf(String(endpoint)));
    }
  });

  it("serves its own metrics where Prometheus scrapes them", () => {
    const prometheus = loadYaml("prometheus/prometheus.yml").root;
    const targets = list(prometheus.scrape_configs, "scrape_configs").flatMap((j) =>
      list(record(j, "job").static_configs, "static_configs").flatMap((sc) =>
        strings(record(sc, "static_config").targets, "targets"),
      ),
    );
    const telemetry = record(record(local.service, "service").telemetry, "telemetry");
    const readers = list(record(telemetry.metrics, "metrics").readers, "readers");
    const ports = readers.map((r) => {
      const exporter = record(record(record(r, "reader").pull, "pull").exporter, "exporter");
      return String(withDefault(record(exporter.prometheus, "prometheus").port));
    });
    expect(targets).toEqual(expect.arrayContaining(ports.map((p) => `otel-collector:${p}`)));
  });
});

describe("grafana/provisioning against the stack (when provisioned)", () => {
  it("loads dashboards from where dashboards/ is mounted", () => {
    const dashboardsTarget = targetOf("grafana", "./dashboards");
    for (const path of yamlFilesIn("grafana/provisioning/dashboards")) {
      for (const provider of list(loadYaml(path).root.providers ?? [], `${path} providers`)) {
        const options = optionalRecord(record(provider, path).options, `${path} options`);
        if (typeof options.path === "string") {
          expect(
            posix.normalize(options.path).startsWith(dashboardsTarget),
            `${path}: ${options.path}`,
          ).toBe(true);
        }
      }
    }
  });

  it("points the data sources at services of the stack", () => {
    for (const path of yamlFilesIn("grafana/provisioning/datasources")) {
      for (const ds of list(loadYaml(path).root.datasources ?? [], `${path} datasources`)) {
        const url = isRecord(ds) ? ds.url : undefined;
        if (typeof url !== "string" || url.includes("$")) continue;
        expect(Object.keys(services), `${path}: ${url}`).toContain(hostOf(url));
      }
    }
  });

  it("has the directories the stack mounts", () => {
    for (const dir of [
      "alerts",
      "alertmanager",
      "grafana/provisioning/datasources",
      "grafana/provisioning/dashboards",
      "dashboards",
    ]) {
      expect(statSync(join(ROOT, dir)).isDirectory(), dir).toBe(true);
    }
  });
});
