import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../helpers/http-server.js";

const run = promisify(execFile);

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => {
        resolve(port);
      });
    });
  });
}

const received: { path: string; body: string }[] = [];
let collector: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  // An OTLP/HTTP receiver on 127.0.0.1, as a Collector would be.
  collector = await startServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      received.push({ path: req.url ?? "", body });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
});
afterAll(async () => {
  await collector.close();
});

describe("selfheal demo exports its telemetry (built CLI)", () => {
  it("sends the run's spans to OTEL_EXPORTER_OTLP_ENDPOINT", async () => {
    const { stdout } = await run(process.execPath, ["dist/cli/main.js", "demo", "--json"], {
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toMatchObject({ scenario: "provider-outage" });
    const traces = received
      .filter((r) => r.path === "/v1/traces")
      .map((r) => r.body)
      .join("\n");
    expect(traces).toContain('"agent.tool_call"');
    expect(traces).toContain('"agent.recovery"');
    expect(traces).toContain("selfheal-demo-provider-outage");
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
