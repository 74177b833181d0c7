import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort, spanTree, startReceiver } from "../helpers/otlp.js";

const run = promisify(execFile);

/** A port nothing listens on right now. */
const freePort = closedPort;

// An OTLP/HTTP receiver on 127.0.0.1, as a Collector would be.
let collector: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  collector = await startReceiver();
});
afterAll(async () => {
  await collector.close();
});

describe("selfheal demo exports its telemetry (built CLI)", () => {
  it("sends the run's spans and metrics to OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP protobuf)", async () => {
    const before = BigInt(Date.now()) * 1_000_000n;
    const { stdout } = await run(process.execPath, ["dist/cli/main.js", "demo", "--json"], {
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toMatchObject({ scenario: "provider-outage" });
    const traces = collector.received.filter((r) => r.path === "/v1/traces");
    expect(traces[0]?.headers["content-type"]).toBe("application/x-protobuf");
    const spans = collector.spans();
    const names = new Set(spans.map((s) => s.name));
    expect(names).toContain("agent.tool_call");
    expect(names).toContain("agent.recovery");
    expect(spans[0]?.resource["service.name"]).toBe("selfheal-demo-provider-outage");
    // Recovery spans nest under their call.
    expect(JSON.stringify(spanTree(spans))).toContain('{"agent.tool_call":[');
    expect(collector.metrics().map((m) => m.name)).toContain("selfheal_recoveries");
    // Spans are dated on the simulated hour, which ends as the demo runs: a backend's view of
    // the last hours shows them spread over the outage.
    const starts = spans.map((s) => s.start).sort((a, b) => (a < b ? -1 : 1));
    const HOUR = 3_600_000_000_000n;
    expect(starts[0]).toBeGreaterThanOrEqual(before - 2n * HOUR);
    expect(starts.at(-1)).toBeLessThanOrEqual(BigInt(Date.now()) * 1_000_000n);
    expect((starts.at(-1) ?? 0n) - (starts[0] ?? 0n)).toBeGreaterThan(HOUR / 2n);
  });

  it("a collector that is down costs the run nothing: same figures, one line on stderr", async () => {
    const port = await freePort();
    const down = await run(process.execPath, ["dist/cli/main.js", "demo", "--json"], {
      env: {
        ...process.env,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_TIMEOUT: "200",
      },
      timeout: 30_000,
    });
    const plain = await run(process.execPath, ["dist/cli/main.js", "demo", "--json"], {
      timeout: 30_000,
    });
    // Everything but the timeline (its entries carry wall-clock text).
    const figures = (text: string) => {
      const all = JSON.parse(text) as Record<string, unknown>;
      delete all.timeline;
      return all;
    };
    expect(figures(down.stdout)).toEqual(figures(plain.stdout));
    expect(down.stderr).toMatch(/selfheal\/otel: telemetry export failing.*ECONNREFUSED/);
    expect(down.stderr).toMatch(/telemetry export\(s\) failed, the run was unaffected/);
  });

  it("serves Prometheus metrics on --metrics-port while it runs", async () => {
    const port = await freePort();
    const child = run(
      process.execPath,
      ["dist/cli/main.js", "demo", "--json", "--speed", "3000", "--metrics-port", String(port)],
      {
        timeout: 30_000,
      },
    );
    let text = "";
    for (let i = 0; i < 100 && !text.includes("selfheal_tool_calls_total{"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
        (r) => r.text(),
        () => "",
      );
    }
    await child;
    expect(text).toMatch(/selfheal_tool_calls_total\{[^}]*tool="complete"[^}]*outcome="success"/);
    expect(text).toContain("selfheal_health_status{");
    expect(text).toMatch(/selfheal_recoveries_total\{/);
  });

  it("a bad --metrics-port exits 2 with one line", async () => {
    const error = await run(process.execPath, [
      "dist/cli/main.js",
      "demo",
      "--metrics-port",
      "http",
    ]).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^selfheal: --metrics-port must be a port number/) as unknown,
    });
  });
});
