/**
 * Prometheus 3 and its promtool, built from the Go module github.com/prometheus/prometheus (the
 * version prometheus/build/go.mod pins) by scripts/build-prometheus.sh into a cache keyed by the
 * hash of prometheus/build/{go.mod,go.sum}; and a running Prometheus 3 on 127.0.0.1 for a test,
 * with the flags the local stack starts it with (OTLP receiver, remote-write receiver, exemplar
 * storage), stopped by its PID.
 *
 * The binaries: $PROMETHEUS3_DIR (a directory holding `prometheus` and `promtool`) if set, else
 * the ones the script has already built (these suites do not build: CI runs the script before the
 * checks). Without them `prometheus3Available` skips the suite with a notice locally and throws
 * under CI=true. Debian's `prometheus` package is 2.42: no OTLP receiver, no `otlp:` section.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { ROOT } from "./config-files.js";
import type { RunningPrometheus, Sample } from "./prometheus.js";

export const PROMETHEUS_BUILD_SCRIPT = join(ROOT, "scripts", "build-prometheus.sh");

/** The directory holding the built `prometheus` and `promtool`, when both are there. */
export const PROMETHEUS3_DIR: string | undefined = (() => {
  const override = process.env.PROMETHEUS3_DIR;
  const dir =
    override ??
    (() => {
      const r = spawnSync("bash", [PROMETHEUS_BUILD_SCRIPT, "--path"], { encoding: "utf8" });
      return r.status === 0 ? r.stdout.trim().split("\n").pop() : undefined;
    })();
  if (dir === undefined) return undefined;
  const both =
    which("prometheus", join(dir, "prometheus")) !== undefined &&
    which("promtool", join(dir, "promtool")) !== undefined;
  if (override !== undefined && !both)
    throw new Error(`PROMETHEUS3_DIR=${override} has no executable prometheus and promtool`);
  return both ? dir : undefined;
})();
export const PROMETHEUS3 = PROMETHEUS3_DIR && join(PROMETHEUS3_DIR, "prometheus");
export const PROMTOOL3 = PROMETHEUS3_DIR && join(PROMETHEUS3_DIR, "promtool");

/** Whether a suite can run: a notice and false locally without the binaries, an error under CI. */
export function prometheus3Available(suite: string): boolean {
  return haveAll(
    suite,
    PROMETHEUS3_DIR === undefined ? ["Prometheus 3 (prometheus, promtool)"] : [],
    "bash scripts/build-prometheus.sh, or set PROMETHEUS3_DIR",
  );
}

interface ApiResponse<T> {
  status: "success" | "error";
  data: T;
  error?: string;
}

export interface RunningPrometheus3 extends RunningPrometheus {
  /** The OTLP receiver's base URL (an OTLP/HTTP exporter adds /v1/metrics). */
  otlpUrl: string;
  /** The remote-write receiver's URL. */
  remoteWriteUrl: string;
  /** Exemplars of the series an expression selects, from `startMs` to `endMs`. */
  exemplars: (
    expr: string,
    startMs: number,
    endMs: number,
  ) => Promise<
    {
      seriesLabels: Record<string, string>;
      exemplars: { labels: Record<string, string>; timestamp: number }[];
    }[]
  >;
  log: () => string;
}

/**
 * Starts Prometheus 3 on 127.0.0.1 with this config and storage, its OTLP and remote-write
 * receivers and exemplar storage on, and waits until it is ready.
 */
export async function startPrometheus3(
  configFile: string,
  dataDir: string,
  extraArgs: string[] = [],
): Promise<RunningPrometheus3> {
  if (!PROMETHEUS3) throw new Error("no Prometheus 3 binary");
  const port = await freePort();
  const url = `http://127.0.0.1:${String(port)}`;
  const child: ChildProcess = spawn(
    PROMETHEUS3,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${dataDir}`,
      `--web.listen-address=127.0.0.1:${String(port)}`,
      "--web.enable-otlp-receiver",
      "--web.enable-remote-write-receiver",
      "--enable-feature=exemplar-storage",
      "--storage.tsdb.retention.time=10y",
      "--log.level=warn",
      ...extraArgs,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-16_000);
  });
  const state = { running: true };
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      state.running = false;
      resolve();
    });
    child.once("error", (error) => {
      state.running = false;
      log += `\n${error.message}`;
      resolve();
    });
  });
  const stop = async () => {
    if (state.running && child.pid !== undefined) {
      const pid = child.pid;
      process.kill(pid, "SIGTERM");
      const timer = setTimeout(() => {
        if (state.running) process.kill(pid, "SIGKILL");
      }, 10_000);
      await exited;
      clearTimeout(timer);
    }
    await exited;
  };

  const deadline = Date.now() + 60_000; // a busy machine may take seconds to start it (issue 27)
  for (;;) {
    if (!state.running) throw new Error(`prometheus exited at start:\n${log}`);
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus not ready after 30 s:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const api = async <T>(path: string, form?: Record<string, string>): Promise<T> => {
    const response = await fetch(`${url}${path}`, {
      ...(form && { method: "POST", body: new URLSearchParams(form) }),
    });
    const body = (await response.json()) as ApiResponse<T>;
    if (body.status !== "success") throw new Error(`${path}: ${body.error ?? response.status}`);
    return body.data;
  };
  const seconds = (ms: number) => String(ms / 1000);
  return {
    url,
    otlpUrl: `${url}/api/v1/otlp`,
    remoteWriteUrl: `${url}/api/v1/write`,
    get: (path) => api(path),
    query: async (expr, timeMs) =>
      (await api<{ result: Sample[] }>("/api/v1/query", { query: expr, time: seconds(timeMs) }))
        .result,
    queryRange: async (expr, startMs, endMs, stepS) =>
      (
        await api<{ result: Sample[] }>("/api/v1/query_range", {
          query: expr,
          start: seconds(startMs),
          end: seconds(endMs),
          step: String(stepS),
        })
      ).result,
    exemplars: (expr, startMs, endMs) =>
      api("/api/v1/query_exemplars", {
        query: expr,
        start: seconds(startMs),
        end: seconds(endMs),
      }),
    log: () => log,
    stop,
  };
}
