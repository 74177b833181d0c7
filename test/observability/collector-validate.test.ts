/**
 * A real Collector on collector/*.yaml: the distribution of collector/builder-config.yaml, built
 * once by scripts/build-collector.sh (cached by the hash of collector/build/, so only the first run
 * on a machine compiles), runs `validate --config` on every configuration, with a dummy of the
 * right shape for each variable that has no default; then it starts on a minimal configuration
 * (OTLP/HTTP receiver on 127.0.0.1 -> file exporter), takes one span over OTLP/HTTP JSON and
 * writes it to the file.
 *
 * The binary: $SELFHEAL_OTELCOL if set, else the script's (which builds it when Go is on the PATH,
 * or finds an already built one). Without either the suite is skipped with a notice locally and
 * fails under CI=true.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { eventually } from "../helpers/otlp.js";
import { BUILD_SCRIPT, collectorConfigFiles } from "./collector-dist.js";
import { ROOT } from "./config-files.js";

const run = promisify(execFile);
const SUITE = "Collector validate and run (collector/*.yaml)";
/** A cold build compiles ~1,000 packages under `nice -n 19` on 2 cores: minutes, once. */
const BUILD_TIMEOUT_MS = 30 * 60_000;

const OVERRIDE = process.env.SELFHEAL_OTELCOL;
const GO = which("go");
/** Where the script puts (or has put) the binary for the current collector/build/ sources. */
const CACHED = (() => {
  const r = spawnSync("bash", [BUILD_SCRIPT, "--path"], { encoding: "utf8" });
  const path = r.status === 0 ? r.stdout.trim().split("\n").pop() : undefined;
  return path !== undefined && which("otelcol", path) !== undefined ? path : undefined;
})();

if (OVERRIDE !== undefined && which("otelcol", OVERRIDE) === undefined)
  throw new Error(`SELFHEAL_OTELCOL=${OVERRIDE} is not an executable file`);
const available =
  OVERRIDE !== undefined ||
  haveAll(
    SUITE,
    GO !== undefined || CACHED !== undefined ? [] : ["go"],
    "install Go 1.26+, or set SELFHEAL_OTELCOL to an otelcol binary",
  );

/**
 * A dummy of the right shape for each variable the configurations read without a default
 * (collector/README.md, "Environment variables": the ones marked required).
 */
const REQUIRED: Record<string, string> = {
  HONEYCOMB_API_KEY: "hcaik_dummy0000000000000000000000",
  GRAFANA_CLOUD_OTLP_ENDPOINT: "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp",
  GRAFANA_CLOUD_INSTANCE_ID: "123456",
  GRAFANA_CLOUD_PROMETHEUS_URL:
    "https://prometheus-prod-24-prod-eu-west-2.grafana.net/api/prom/push",
  GRAFANA_CLOUD_PROMETHEUS_USER: "654321",
  GRAFANA_CLOUD_API_TOKEN: "glc_dummy",
  // base64("<user>:<token>"), for bearertokenauth with `scheme: Basic`
  GRAFANA_CLOUD_OTLP_BASIC_AUTH: Buffer.from("123456:glc_dummy").toString("base64"),
  GRAFANA_CLOUD_PROMETHEUS_BASIC_AUTH: Buffer.from("654321:glc_dummy").toString("base64"),
  SELFHEAL_TIER2_HOSTNAME: "otelcol-tier2.observability.svc.cluster.local",
};

/** `${env:NAME}` references without a `:-default`. */
function requiredVariables(text: string): string[] {
  return [...new Set([...text.matchAll(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]))]
    .filter((name): name is string => name !== undefined)
    .sort();
}

/** The environment of a Collector child: none of the variables it may read leak in from ours. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(OTELCOL_|HONEYCOMB_|GRAFANA_CLOUD_|TEMPO_|PROMETHEUS_|SELFHEAL_)/.test(k) &&
        !k.startsWith("OTEL_"),
    ),
  );
  return { ...env, ...extra };
}

let binary = "";

describe.skipIf(!available)(SUITE, () => {
  beforeAll(async () => {
    if (OVERRIDE !== undefined) {
      binary = OVERRIDE;
      return;
    }
    // Does nothing (a few ms) when the binary for these sources is already in the cache.
    const { stdout } = await run("bash", [BUILD_SCRIPT], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
      timeout: BUILD_TIMEOUT_MS,
    }).catch((e: unknown) => {
      const err = e as { stderr?: string; message?: string };
      throw new Error(
        `scripts/build-collector.sh failed:\n${(err.stderr ?? err.message ?? "").slice(-4_000)}`,
      );
    });
    binary = stdout.trim().split("\n").pop() ?? "";
    expect(existsSync(binary), `the script printed ${binary}`).toBe(true);
  }, BUILD_TIMEOUT_MS);

  it.each(collectorConfigFiles())("validates collector/%s", async (file) => {
    const path = join(ROOT, "collector", file);
    const needed = requiredVariables(readFileSync(path, "utf8"));
    const dummies = Object.fromEntries(needed.map((name) => [name, REQUIRED[name] ?? "dummy"]));
    const result = await run(binary, ["validate", "--config", path], {
      env: childEnv(dummies),
      timeout: 30_000,
    }).then(
      () => ({ code: 0, stderr: "" }),
      (e: unknown) => {
        const err = e as { code?: number; stderr?: string };
        return { code: err.code ?? -1, stderr: err.stderr ?? String(e) };
      },
    );
    expect(result.code, `${binary} validate --config collector/${file}:\n${result.stderr}`).toBe(0);
  });

  describe("a running Collector", () => {
    let dir = "";
    let child: ChildProcess | undefined;
    let log = "";
    let exited: Promise<number | null> = Promise.resolve(null);

    afterAll(async () => {
      if (child?.exitCode === null && child.pid !== undefined) {
        process.kill(child.pid, "SIGKILL");
        await exited;
      }
      if (dir !== "") rmSync(dir, { recursive: true, force: true });
    });

    it("receives a span over OTLP/HTTP JSON and writes it with the file exporter, then stops on SIGTERM", async () => {
      dir = mkdtempSync(join(tmpdir(), "selfheal-otelcol-"));
      const [httpPort, healthPort] = [await freePort(), await freePort()];
      const out = join(dir, "spans.jsonl");
      const config = join(dir, "config.yaml");
      // collector/local.yaml's shape, minimal: everything on 127.0.0.1 and free ports, no
      // self-telemetry listener (its default is :8888).
      writeFileSync(
        config,
        [
          "extensions:",
          "  health_check:",
          `    endpoint: 127.0.0.1:${String(healthPort)}`,
          "receivers:",
          "  otlp:",
          "    protocols:",
          "      http:",
          `        endpoint: 127.0.0.1:${String(httpPort)}`,
          "processors:",
          "  memory_limiter:",
          "    check_interval: 1s",
          "    limit_percentage: 80",
          "    spike_limit_percentage: 20",
          "exporters:",
          "  file:",
          `    path: ${JSON.stringify(out)}`,
          "    flush_interval: 100ms",
          "service:",
          "  extensions: [health_check]",
          "  telemetry:",
          "    metrics:",
          "      level: none",
          "  pipelines:",
          "    traces:",
          "      receivers: [otlp]",
          "      processors: [memory_limiter]",
          "      exporters: [file]",
          "",
        ].join("\n"),
      );
      const proc = spawn(binary, ["--config", config], {
        env: childEnv({}),
        stdio: ["ignore", "ignore", "pipe"],
      });
      child = proc;
      proc.stderr.on("data", (chunk: Buffer) => {
        log = (log + chunk.toString()).slice(-8_000);
      });
      exited = new Promise((resolve) => {
        proc.once("exit", (code) => {
          resolve(code);
        });
        proc.once("error", () => {
          resolve(null);
        });
      });

      const traceId = randomBytes(16).toString("hex");
      const spanId = randomBytes(8).toString("hex");
      const now = BigInt(Date.now()) * 1_000_000n;
      const body = JSON.stringify({
        resourceSpans: [
          {
            resource: {
              attributes: [{ key: "service.name", value: { stringValue: "collector-test" } }],
            },
            scopeSpans: [
              {
                scope: { name: "selfheal-test" },
                spans: [
                  {
                    traceId,
                    spanId,
                    name: "agent.tool_call",
                    kind: 1,
                    startTimeUnixNano: String(now - 5_000_000n),
                    endTimeUnixNano: String(now),
                    attributes: [{ key: "gen_ai.tool.name", value: { stringValue: "search" } }],
                  },
                ],
              },
            ],
          },
        ],
      });

      // Send once the receiver listens: only a refused connection is retried (nothing was taken).
      let status = 0;
      const until = Date.now() + 60_000; // a busy machine may take seconds (issue 27)
      while (status === 0) {
        if (proc.exitCode !== null) throw new Error(`the Collector exited early:\n${log}`);
        try {
          const res = await fetch(`http://127.0.0.1:${String(httpPort)}/v1/traces`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          });
          status = res.status;
          await res.arrayBuffer();
        } catch {
          if (Date.now() > until) throw new Error(`the OTLP receiver never listened:\n${log}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      expect(status, log).toBe(200);

      await eventually(
        () => existsSync(out) && readFileSync(out, "utf8").includes(traceId),
        `the span in ${out}`,
        60_000,
      );
      const line = readFileSync(out, "utf8")
        .split("\n")
        .find((l) => l.includes(traceId));
      const written = JSON.parse(line ?? "{}") as {
        resourceSpans?: { scopeSpans?: { spans?: { spanId?: string; name?: string }[] }[] }[];
      };
      const span = written.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.[0];
      expect(span).toMatchObject({ spanId, name: "agent.tool_call" });

      // Stopped by its PID; a clean shutdown exits 0.
      if (proc.pid === undefined) throw new Error("no PID");
      process.kill(proc.pid, "SIGTERM");
      const code = await Promise.race([
        exited,
        new Promise<"timeout">((resolve) => {
          setTimeout(() => {
            resolve("timeout");
          }, 60_000);
        }),
      ]);
      expect(code, log).toBe(0);
    }, 240_000);
  });
});
