/**
 * A real `redis-server` (Debian's redis-server package) on 127.0.0.1 for a test: a free port, no
 * persistence, started and stopped by its PID. `kill()` ends it abruptly (SIGKILL) and
 * `restart()` starts a fresh one on the same port, as a crashed and restarted Redis would be.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { freePort, haveAll, which } from "./binaries.js";

export const REDIS_SERVER = which("redis-server", process.env.REDIS_SERVER_PATH);

/** Whether a Redis suite can run (see haveAll). */
export const haveRedis = (suite: string): boolean =>
  haveAll(suite, REDIS_SERVER ? [] : ["redis-server"], "apt-get install redis-server");

export interface RunningRedis {
  url: string;
  port: number;
  /** PID of the running server (changes on restart). */
  readonly pid: number | undefined;
  /** Ends the server abruptly (SIGKILL to its PID), as a crash would. */
  kill: () => Promise<void>;
  /** Starts a fresh, empty server on the same port. */
  restart: () => Promise<void>;
  /** Ends it (SIGTERM) and waits for the exit. */
  stop: () => Promise<void>;
}

export async function startRedis(): Promise<RunningRedis> {
  if (!REDIS_SERVER) throw new Error("no redis-server binary");
  const binary = REDIS_SERVER;
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async () => {
    const proc = spawn(
      binary,
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    child = proc;
    let log = "";
    proc.stderr.on("data", (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-2_000);
    });
    exited = new Promise<void>((resolve) => {
      proc.once("exit", () => {
        resolve();
      });
      proc.once("error", () => {
        resolve();
      });
    });
    const probe = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on("error", () => undefined);
    // Generous: a loaded machine may take seconds to start a server (issue 27).
    const deadline = Date.now() + 60_000;
    try {
      for (;;) {
        if (proc.exitCode !== null) throw new Error(`redis-server exited at start: ${log}`);
        const up = await probe.connect().then(
          () => probe.ping().then(() => true),
          () => false,
        );
        if (up) return;
        if (Date.now() > deadline) throw new Error(`redis-server did not start: ${log}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      probe.disconnect();
    }
  };

  const end = async (signal: NodeJS.Signals) => {
    if (child?.pid !== undefined && child.exitCode === null) process.kill(child.pid, signal);
    await exited;
  };

  await launch();
  return {
    url,
    port,
    get pid() {
      return child?.pid;
    },
    kill: () => end("SIGKILL"),
    restart: launch,
    stop: () => end("SIGTERM"),
  };
}

/**
 * A redis-server for a describe block: started before its tests and stopped after, with `admin`,
 * a plain client for the tests' own checks.
 */
export function redisForSuite(): { readonly redis: RunningRedis; readonly admin: Redis } {
  let redis: RunningRedis | undefined;
  let admin: Redis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined)
      throw new Error("redis-server is not started yet (used outside a test)");
    return value;
  };
  return {
    get redis() {
      return started(redis);
    },
    get admin() {
      return started(admin);
    },
  };
}
