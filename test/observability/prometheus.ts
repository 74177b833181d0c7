/**
 * Finds Debian's `prometheus` and `promtool` (apt-get install prometheus), and runs a real
 * Prometheus on 127.0.0.1 for a test. Without the binaries a suite is skipped with a notice, and
 * fails under CI=true: CI installs them (.ci/run).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { freePort, haveAll, which } from "../helpers/binaries.js";

export const PROMTOOL = which("promtool", process.env.PROMTOOL_PATH);
export const PROMETHEUS = which("prometheus", process.env.PROMETHEUS_PATH);

/**
 * Whether the binaries a suite needs are here. Missing: a visible notice and `false` locally,
 * an error under CI=true (the suite must not pass by skipping there).
 */
export function haveBinaries(suite: string, needs: { prometheus?: boolean }): boolean {
  const missing = [
    ...(PROMTOOL ? [] : ["promtool"]),
    ...(needs.prometheus && !PROMETHEUS ? ["prometheus"] : []),
  ];
  return haveAll(suite, missing, "apt-get install prometheus");
}

export interface Sample {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

export interface RunningPrometheus {
  url: string;
  /** Instant query at `timeMs` (Unix ms). */
  query: (expr: string, timeMs: number) => Promise<Sample[]>;
  /** Range query from `startMs` to `endMs` (Unix ms) every `stepS` seconds. */
  queryRange: (expr: string, startMs: number, endMs: number, stepS: number) => Promise<Sample[]>;
  get: <T>(path: string) => Promise<T>;
  /** Ends the process (SIGTERM to its PID) and waits for it to exit. */
  stop: () => Promise<void>;
}

interface ApiResponse<T> {
  status: "success" | "error";
  data: T;
  error?: string;
}

/**
 * Starts `prometheus` on 127.0.0.1 with this config and storage, and waits until it is ready.
 * `stop()` ends that process (by its PID) and waits for it to exit.
 */
export async function startPrometheus(
  configFile: string,
  dataDir: string,
): Promise<RunningPrometheus> {
  if (!PROMETHEUS) throw new Error("no prometheus binary");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${dataDir}`,
      `--web.listen-address=127.0.0.1:${port}`,
      // Keep whatever the test backfilled, however old.
      "--storage.tsdb.retention.time=10y",
      "--log.level=warn",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4_000);
  });
  const state = { running: true };
  const exited = new Promise<void>((resolve) => {
    const done = (reason: string) => {
      state.running = false;
      if (reason) log += `\n${reason}`;
      resolve();
    };
    child.once("exit", () => {
      done("");
    });
    child.once("error", (error) => {
      done(error.message);
    });
  });

  const stop = async () => {
    if (state.running && child.pid !== undefined) process.kill(child.pid, "SIGTERM");
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
    stop,
  };
}
