/**
 * The two-tier deployment of collector/README.md ("Running several Collectors") on real
 * Collectors: tier 1 runs collector/tier1-loadbalancer.yaml, its `load_balancing` exporters
 * resolving SELFHEAL_TIER2_HOSTNAME by DNS (an IP literal, 127.0.0.1, resolves to itself, so the
 * shipped resolver runs unchanged) on SELFHEAL_TIER2_PORT; tier 2 runs collector/local.yaml with
 * its exporters pointed at a sink Collector (file exporter) in place of Tempo and Prometheus.
 *
 * - With the files' defaults (no TLS variable set on either side), a trace and a metric sent to
 *   tier 1 reach the sink through tier 2.
 * - With TLS on both ends (collector/overlays/tier2-tls.yaml merged over local.yaml on tier 2;
 *   SELFHEAL_TIER2_INSECURE=false and SELFHEAL_TIER2_CA_FILE on tier 1), certificates made here with
 *   `openssl`, they reach it too.
 * - A tier 1 dialling TLS to a plaintext tier 2 (what the defaults did before) delivers nothing.
 *
 * Timings (env, ms): SELFHEAL_TIERS_DELIVERY_MS, how long a delivery may take (default 15000);
 * SELFHEAL_TIERS_REFUSAL_MS, how long the refusal case waits for the TLS error (default 8000);
 * SELFHEAL_TIERS_QUIET_MS, how long it then checks that nothing arrives (default 3000).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveAll, which } from "../helpers/binaries.js";
import {
  collectorAvailable,
  collectorFile,
  envMs,
  sendSpans,
  spanIdOf,
  startCollector,
  startSink,
  stopAllCollectors,
  traceIdOf,
  waitFor,
  type RunningCollector,
  type Sink,
} from "./otelcol-run.js";

const SUITE = "two Collector tiers (tier1-loadbalancer.yaml -> local.yaml)";
const DELIVERY_MS = envMs("SELFHEAL_TIERS_DELIVERY_MS", 15_000);
const REFUSAL_MS = envMs("SELFHEAL_TIERS_REFUSAL_MS", 8_000);
const QUIET_MS = envMs("SELFHEAL_TIERS_QUIET_MS", 3_000);
const available =
  collectorAvailable(SUITE) &&
  haveAll(SUITE, which("openssl") ? [] : ["openssl"], "apt-get install openssl");

let dir = "";
let sink: Sink;

/** A CA and a server certificate for 127.0.0.1 signed by it (EC P-256, valid one day). */
function makeCertificates(into: string): { ca: string; cert: string; key: string } {
  const ca = join(into, "ca.pem");
  const caKey = join(into, "ca.key");
  const cert = join(into, "tier2.pem");
  const key = join(into, "tier2.key");
  const csr = join(into, "tier2.csr");
  const ext = join(into, "tier2.ext");
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(
    "req", "-x509", ...ec, "-keyout", caKey, "-out", ca, "-days", "1",
    "-subj", "/CN=selfheal test CA",
    "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  ); // prettier-ignore
  openssl("req", ...ec, "-keyout", key, "-out", csr, "-subj", "/CN=otelcol-tier2");
  writeFileSync(
    ext,
    [
      "basicConstraints=critical,CA:FALSE",
      "keyUsage=critical,digitalSignature",
      "extendedKeyUsage=serverAuth",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "",
    ].join("\n"),
  );
  openssl(
    "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial",
    "-out", cert, "-days", "1", "-extfile", ext,
  ); // prettier-ignore
  return { ca, cert, key };
}

/** One metric point (a counter) from `service`, as OTLP/HTTP JSON. */
function metricRequest(service: string, name: string): string {
  const now = BigInt(Date.now()) * 1_000_000n;
  return JSON.stringify({
    resourceMetrics: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: service } }] },
        scopeMetrics: [
          {
            scope: { name: "selfheal" },
            metrics: [
              {
                name,
                sum: {
                  aggregationTemporality: 2,
                  isMonotonic: true,
                  dataPoints: [
                    {
                      attributes: [{ key: "agent", value: { stringValue: "tiers-test" } }],
                      startTimeUnixNano: String(now - 60_000_000_000n),
                      timeUnixNano: String(now),
                      asInt: "3",
                    },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  });
}

/** Tier 2 (local.yaml, exporters to the sink, plus `configs`) and tier 1 in front of it. */
async function startTiers(
  label: string,
  tier2: { configs?: string[]; env?: Record<string, string> },
  tier1Env: Record<string, string>,
): Promise<{ tier1: RunningCollector; tier2: RunningCollector }> {
  const second = await startCollector({
    name: `${label} tier 2`,
    configs: [collectorFile("local.yaml"), ...(tier2.configs ?? [])],
    env: {
      TEMPO_OTLP_GRPC_ENDPOINT: sink.grpcEndpoint,
      PROMETHEUS_OTLP_ENDPOINT: sink.httpUrl,
      ...tier2.env,
    },
  });
  const first = await startCollector({
    name: `${label} tier 1`,
    configs: [collectorFile("tier1-loadbalancer.yaml")],
    env: {
      SELFHEAL_TIER2_HOSTNAME: "127.0.0.1",
      SELFHEAL_TIER2_PORT: second.grpcEndpoint.split(":")[1] ?? "",
      ...tier1Env,
    },
  });
  return { tier1: first, tier2: second };
}

/** A failed tool call's trace (root last, as an SDK exports it) and a metric, into tier 1. */
async function sendThrough(tier1: RunningCollector, seed: string) {
  const traceId = traceIdOf(seed);
  const root = spanIdOf(`${seed}-root`);
  await sendSpans(tier1.httpUrl, "tiers-test", [
    {
      traceId,
      spanId: spanIdOf(`${seed}-error`),
      parentSpanId: root,
      name: "agent.tool_call.error",
      status: 2,
      attributes: { "error.type": "TimeoutError" },
    },
    {
      traceId,
      spanId: root,
      name: "agent.tool_call",
      status: 2,
      attributes: { "selfheal.agent.name": "tiers-test", "gen_ai.tool.name": "search" },
    },
  ]);
  const metric = `tiers_test_${seed.replace(/\W/g, "_")}`;
  const res = await fetch(`${tier1.httpUrl}/v1/metrics`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: metricRequest("tiers-test", metric),
  });
  expect(res.status, await res.text()).toBe(200);
  return { traceId, metric };
}

const metricNames = () =>
  new Set(
    sink
      .metricRequests()
      .flatMap((r) => r.resourceMetrics ?? [])
      .flatMap((rm) => rm.scopeMetrics ?? [])
      .flatMap((sm) => sm.metrics ?? [])
      .map((m) => m.name),
  );

describe.skipIf(!available)(SUITE, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "selfheal-tiers-"));
    sink = await startSink(dir);
  });

  afterAll(async () => {
    await stopAllCollectors();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("delivers spans and metrics through both tiers with the files' defaults", async () => {
    const { tier1, tier2 } = await startTiers("defaults", {}, {});
    try {
      const { traceId, metric } = await sendThrough(tier1, "defaults");
      const spans = () => sink.spans().filter((s) => s.traceId === traceId);
      const delivered = await waitFor(
        () => spans().length === 2 && metricNames().has(metric),
        DELIVERY_MS,
      );
      expect(
        delivered,
        `not delivered in ${String(DELIVERY_MS)} ms.\ntier 1:\n${tier1.log()}\ntier 2:\n${tier2.log()}`,
      ).toBe(true);
      expect(
        spans()
          .map((s) => s.name)
          .sort(),
      ).toEqual(["agent.tool_call", "agent.tool_call.error"]);
    } finally {
      await Promise.all([tier1.stop(), tier2.stop()]);
    }
  }, 180_000);

  it("delivers them with TLS between the tiers (tier2-tls.yaml overlay, CA on tier 1)", async () => {
    const certs = makeCertificates(dir);
    const { tier1, tier2 } = await startTiers(
      "TLS",
      {
        configs: [collectorFile("overlays/tier2-tls.yaml")],
        env: { SELFHEAL_TIER2_TLS_CERT_FILE: certs.cert, SELFHEAL_TIER2_TLS_KEY_FILE: certs.key },
      },
      { SELFHEAL_TIER2_INSECURE: "false", SELFHEAL_TIER2_CA_FILE: certs.ca },
    );
    try {
      const { traceId, metric } = await sendThrough(tier1, "tls");
      const delivered = await waitFor(
        () =>
          sink.spans().filter((s) => s.traceId === traceId).length === 2 &&
          metricNames().has(metric),
        DELIVERY_MS,
      );
      expect(
        delivered,
        `not delivered in ${String(DELIVERY_MS)} ms.\ntier 1:\n${tier1.log()}\ntier 2:\n${tier2.log()}`,
      ).toBe(true);
      // Tier 2 takes TLS only: plaintext OTLP/HTTP to it is refused.
      const plaintext = await fetch(`${tier2.httpUrl}/v1/traces`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      }).then(
        (r) => r.status,
        () => "refused",
      );
      expect(plaintext).not.toBe(200);
    } finally {
      await Promise.all([tier1.stop(), tier2.stop()]);
    }
  }, 180_000);

  it("delivers nothing when tier 1 dials TLS and tier 2 listens in plaintext (the old defaults)", async () => {
    const { tier1, tier2 } = await startTiers("mismatch", {}, { SELFHEAL_TIER2_INSECURE: "false" });
    try {
      const { traceId } = await sendThrough(tier1, "mismatch");
      // The load balancer's OTLP exporter fails its TLS handshake and keeps retrying.
      const failed = await waitFor(
        () => /authentication handshake failed: tls: /.test(tier1.log()),
        REFUSAL_MS,
      );
      expect(failed, tier1.log()).toBe(true);
      // Past the time a delivery takes with matching ends (tier 1's batch, tier 2's decision),
      // nothing has arrived.
      await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
      expect(sink.spans().filter((s) => s.traceId === traceId)).toEqual([]);
    } finally {
      await Promise.all([tier1.stop(1_000), tier2.stop()]);
    }
  }, 180_000);
});
