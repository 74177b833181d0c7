/**
 * A real Redis Cluster on 127.0.0.1 for a test: six `redis-server --cluster-enabled yes` (Debian's
 * redis-server package), three masters with one replica each, joined with `redis-cli --cluster
 * create` (Debian's redis-tools). Each node gets a free port and a free cluster-bus port, no
 * persistence, its nodes.conf in a temp dir; every process is stopped by its PID at the end,
 * also when the start fails half-way, and killed if the test process exits first.
 *
 * `failover()` moves the slots of one master to its replica, either as an operator would
 * (`CLUSTER FAILOVER` on the replica: no acknowledged write lost) or as a crash would (SIGKILL
 * to the master's PID, the replica promoted by the cluster after `cluster-node-timeout`).
 */
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { freePort, haveAll, which } from "./binaries.js";
import { REDIS_SERVER } from "./redis-server.js";

export const REDIS_CLI = which("redis-cli", process.env.REDIS_CLI_PATH);

/** Whether a Redis Cluster suite can run: it needs redis-server and redis-cli (see haveAll). */
export const haveRedisCluster = (suite: string): boolean =>
  haveAll(
    suite,
    [...(REDIS_SERVER ? [] : ["redis-server"]), ...(REDIS_CLI ? [] : ["redis-cli"])],
    "apt-get install redis-server redis-tools",
  );

const HOST = "127.0.0.1";

/** One node of the cluster as the cluster sees it now (`CLUSTER NODES`). */
export interface ClusterNodeView {
  id: string;
  port: number;
  role: "master" | "replica";
  /** The master this node replicates (replicas only). */
  masterId: string | undefined;
  /** Slot ranges it serves, `[from, to]` inclusive (masters only). */
  slots: [number, number][];
  /** Whether its process is running (false after a kill). */
  alive: boolean;
}

export interface FailoverOptions {
  /**
   * `"manual"` (default): `CLUSTER FAILOVER` on the replica, which first catches up with its
   * master (an operator's planned switch, no acknowledged write lost). `"kill"`: SIGKILL to the
   * master's PID (a crash); the cluster promotes the replica after `cluster-node-timeout`, and
   * a write the master acknowledged but had not yet replicated is lost, as Redis documents.
   */
  how?: "manual" | "kill";
  /**
   * For `"kill"`: first wait (up to 30 s) until the replica has every write the master has (its
   * replication offset), so the test knows what the crash loses: nothing acknowledged before the
   * call (default true). False kills at once.
   */
  caughtUp?: boolean;
  /** How long to wait for the promotion and `cluster_state:ok` on every live node, ms. */
  timeoutMs?: number;
}

export interface FailoverResult {
  /** The old master's port (dead after a kill, a replica after a manual failover). */
  from: number;
  /** The promoted replica's port. */
  to: number;
  /** Wall time from the kill or the command until every live node agreed, ms. */
  tookMs: number;
}

export interface RunningCluster {
  /** Startup nodes for `new Cluster(...)`: every node (a client needs any one of them). */
  readonly startupNodes: { host: string; port: number }[];
  /** Every node's port, in start order. */
  readonly ports: number[];
  /** PIDs of the running processes by port (a killed node is left out). */
  pids(): Map<number, number>;
  /** The nodes as the cluster sees them now (read from a live node). */
  nodes(): Promise<ClusterNodeView[]>;
  /** The port of the master serving `key`'s slot now. */
  masterOf(key: string): Promise<number>;
  /** A plain connection to one node (closed by the harness at stop). */
  admin(port: number): Redis;
  /** Moves the slots of the master serving `key`'s slot to its replica (see FailoverOptions). */
  failover(key: string, options?: FailoverOptions): Promise<FailoverResult>;
  /** Waits until every live node reports `cluster_state:ok` and agrees on every slot's master. */
  settled(timeoutMs?: number): Promise<void>;
  /** Stops every node (SIGTERM, SIGKILL after 3 s) and removes the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Masters (default 3: the smallest cluster redis-cli creates). */
  masters?: number;
  /** Replicas per master (default 1). */
  replicas?: number;
  /** `cluster-node-timeout`, ms (default 1000: a killed master is failed over in ~2-3 s). */
  nodeTimeoutMs?: number;
}

interface NodeProcess {
  port: number;
  busPort: number;
  child: ChildProcess;
  exited: Promise<void>;
  log: () => string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every running node of every cluster this process started: killed if the process exits first. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function killOnExit(child: ChildProcess): void {
  running.add(child);
  child.once("exit", () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const c of running) {
      if (c.pid !== undefined && c.exitCode === null) {
        try {
          process.kill(c.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
  });
}

function launchNode(
  binary: string,
  dir: string,
  port: number,
  busPort: number,
  nodeTimeoutMs: number,
): NodeProcess {
  const child = spawn(
    binary,
    [
      "--port",
      String(port),
      "--cluster-port",
      String(busPort),
      "--bind",
      HOST,
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      join(dir, `nodes-${port}.conf`),
      "--cluster-node-timeout",
      String(nodeTimeoutMs),
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--protected-mode",
      "no",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  killOnExit(child);
  let log = "";
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4_000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      resolve();
    });
    child.once("error", () => {
      resolve();
    });
  });
  return { port, busPort, child, exited, log: () => log };
}

/** Ends a node by PID (SIGTERM, then SIGKILL if it lingers) and waits for the exit. */
async function endNode(node: NodeProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  const { child } = node;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.pid, signal);
  } catch {
    return; // already gone
  }
  const late = setTimeout(() => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
  }, 3_000);
  await node.exited;
  clearTimeout(late);
}

function runCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    if (!REDIS_CLI) {
      reject(new Error("no redis-cli binary"));
      return;
    }
    execFile(REDIS_CLI, args, { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error)
        reject(
          new Error(`redis-cli ${args.join(" ")} failed: ${error.message}\n${stdout}\n${stderr}`),
        );
      else resolve(stdout);
    });
  });
}

/** `CLUSTER NODES` parsed. */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", address = "", flags = "", master = "-", , , , , ...slotFields] = line
        .trim()
        .split(" ");
      const port = Number(address.split("@")[0]?.split(":").at(-1));
      const flagSet = new Set(flags.split(","));
      const slots: [number, number][] = [];
      for (const field of slotFields) {
        if (field.startsWith("[")) continue; // a slot being migrated
        const [from, to = from] = field.split("-");
        slots.push([Number(from), Number(to)]);
      }
      return {
        id,
        port,
        role: flagSet.has("master") ? "master" : "replica",
        masterId: master === "-" ? undefined : master,
        slots,
        alive: !flagSet.has("fail") && !flagSet.has("fail?") && !flagSet.has("noaddr"),
      } satisfies ClusterNodeView;
    });
}

/** Starts a cluster and waits until it serves every slot, each master with its replicas in sync. */
export async function startCluster(options: ClusterOptions = {}): Promise<RunningCluster> {
  if (!REDIS_SERVER || !REDIS_CLI) throw new Error("no redis-server or redis-cli binary");
  const binary = REDIS_SERVER;
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1_000;
  const dir = mkdtempSync(join(tmpdir(), "selfheal-redis-cluster-"));
  const processes = new Map<number, NodeProcess>();
  const admins = new Map<number, Redis>();
  let stopped = false;

  const admin = (port: number): Redis => {
    let client = admins.get(port);
    if (!client) {
      client = new Redis({
        host: HOST,
        port,
        lazyConnect: false,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: true,
        retryStrategy: (times) => (stopped ? null : Math.min(50 * times, 500)),
      });
      client.on("error", () => undefined);
      admins.set(port, client);
    }
    return client;
  };

  const liveProcesses = () =>
    [...processes.values()].filter((p) => p.child.exitCode === null && p.child.signalCode === null);

  /** A reply from one node, or undefined when it does not answer within `ms`. */
  const ask = async <T>(port: number, work: (client: Redis) => Promise<T>, ms = 1_000) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        work(admin(port)),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => {
            resolve(undefined);
          }, ms);
        }),
      ]);
    } catch {
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  };

  const nodes = async (): Promise<ClusterNodeView[]> => {
    for (const p of liveProcesses()) {
      const text = await ask(p.port, (c) => c.cluster("NODES") as Promise<string>);
      if (typeof text === "string") {
        const alive = new Set(liveProcesses().map((q) => q.port));
        return parseClusterNodes(text).map((n) => ({ ...n, alive: n.alive && alive.has(n.port) }));
      }
    }
    throw new Error("no node of the cluster answers CLUSTER NODES");
  };

  /** Every live node: cluster_state ok, all slots ok, and the same master for every slot range. */
  const settled = async (timeoutMs = 20_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    for (;;) {
      const live = liveProcesses();
      const views: string[] = [];
      let table: ClusterNodeView[] = [];
      let ok = live.length > 0;
      for (const p of live) {
        const info = await ask(p.port, (c) => c.cluster("INFO"));
        const text = await ask(p.port, (c) => c.cluster("NODES") as Promise<string>);
        if (
          typeof info !== "string" ||
          typeof text !== "string" ||
          !info.includes("cluster_state:ok") ||
          !info.includes("cluster_slots_ok:16384")
        ) {
          ok = false;
          last = `${p.port}: ${String(info).split("\r\n").slice(0, 4).join(" ")}`;
          break;
        }
        table = parseClusterNodes(text);
        // What this node believes serves each slot range: every live node must say the same.
        views.push(
          table
            .filter((n) => n.role === "master" && n.slots.length > 0)
            .map((n) => `${n.port}:${JSON.stringify(n.slots)}`)
            .sort()
            .join(" "),
        );
      }
      if (ok && new Set(views).size === 1) {
        // Replicas of live masters have their replication link up (a manual failover needs it).
        const livePorts = new Set(live.map((p) => p.port));
        const liveIds = new Set(table.filter((n) => livePorts.has(n.port)).map((n) => n.id));
        let synced = true;
        for (const n of table) {
          if (n.role !== "replica" || !livePorts.has(n.port)) continue;
          if (n.masterId === undefined || !liveIds.has(n.masterId)) continue;
          const repl = await ask(n.port, (c) => c.info("replication"));
          if (typeof repl !== "string" || !repl.includes("master_link_status:up")) {
            synced = false;
            last = `${n.port}: replication link to its master not up`;
            break;
          }
        }
        if (synced) return;
      } else if (ok) {
        last = `nodes disagree: ${[...new Set(views)].join(" | ")}`;
      }
      if (Date.now() > deadline)
        throw new Error(`cluster not settled after ${timeoutMs} ms: ${last}`);
      await sleep(100);
    }
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    for (const client of admins.values()) client.disconnect();
    admins.clear();
    await Promise.all([...processes.values()].map((p) => endNode(p)));
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      // The cluster bus gets its own free port rather than port + 10000.
      const [port, busPort] = [await freePort(), await freePort()];
      processes.set(port, launchNode(binary, dir, port, busPort, nodeTimeoutMs));
    }
    // Every node answers PING before the cluster is created (generous: a busy machine is slow).
    const deadline = Date.now() + 60_000;
    for (const p of processes.values()) {
      for (;;) {
        if (p.child.exitCode !== null)
          throw new Error(`redis-server ${p.port} exited at start: ${p.log()}`);
        if ((await ask(p.port, (c) => c.ping(), 500)) === "PONG") break;
        if (Date.now() > deadline)
          throw new Error(`redis-server ${p.port} did not start: ${p.log()}`);
        await sleep(50);
      }
    }
    // redis-cli picks the masters, spreads the 16384 slots over them and gives each its replicas.
    await runCli(
      [
        "--cluster",
        "create",
        ...[...processes.keys()].map((port) => `${HOST}:${port}`),
        "--cluster-replicas",
        String(replicas),
        "--cluster-yes",
      ],
      30_000,
    );
    await settled(30_000);
  } catch (error) {
    await stop();
    throw error;
  }

  const masterOf = async (key: string): Promise<number> => {
    const live = liveProcesses()[0];
    if (!live) throw new Error("no live node");
    const slot = await admin(live.port).cluster("KEYSLOT", key);
    const owner = (await nodes()).find(
      (n) => n.role === "master" && n.alive && n.slots.some(([a, b]) => slot >= a && slot <= b),
    );
    if (!owner) throw new Error(`no live master serves slot ${slot}`);
    return owner.port;
  };

  /** Waits until the replica's replication offset reaches the master's. */
  const caughtUp = async (masterPort: number, replicaPort: number): Promise<void> => {
    const offset = (text: string | undefined, field: string) =>
      Number(new RegExp(`^${field}:(\\d+)`, "m").exec(text ?? "")?.[1] ?? NaN);
    const deadline = Date.now() + 30_000; // milliseconds when idle; seconds when busy (issue 27)
    for (;;) {
      const wanted = offset(
        await ask(masterPort, (c) => c.info("replication")),
        "master_repl_offset",
      );
      const has = offset(await ask(replicaPort, (c) => c.info("replication")), "slave_repl_offset");
      if (has >= wanted) return;
      if (Date.now() > deadline)
        throw new Error(
          `replica ${replicaPort} still behind master ${masterPort} (${has} < ${wanted})`,
        );
      await sleep(10);
    }
  };

  const failover = async (key: string, opts: FailoverOptions = {}): Promise<FailoverResult> => {
    const how = opts.how ?? "manual";
    const timeoutMs = opts.timeoutMs ?? 20_000;
    const table = await nodes();
    const from = await masterOf(key);
    const master = table.find((n) => n.port === from);
    const replica = table.find((n) => n.role === "replica" && n.alive && n.masterId === master?.id);
    if (!master || !replica) throw new Error(`master ${from} has no live replica to fail over to`);
    const started = Date.now();
    if (how === "manual") {
      // Answers OK at once (or throws): the switch itself is awaited below.
      await admin(replica.port).cluster("FAILOVER");
    } else {
      const proc = processes.get(from);
      if (!proc) throw new Error(`no process for port ${from}`);
      if (opts.caughtUp ?? true) await caughtUp(from, replica.port);
      admins.get(from)?.disconnect();
      admins.delete(from);
      await endNode(proc, "SIGKILL");
    }
    // Promoted: the replica is master of the old master's slots on every live node's table.
    const deadline = started + timeoutMs;
    for (;;) {
      let promoted = true;
      for (const p of liveProcesses()) {
        const text = await ask(p.port, (c) => c.cluster("NODES") as Promise<string>);
        const me =
          typeof text === "string"
            ? parseClusterNodes(text).find((n) => n.port === replica.port)
            : undefined;
        if (me?.role !== "master" || me.slots.length === 0) {
          promoted = false;
          break;
        }
      }
      if (promoted) break;
      if (Date.now() > deadline)
        throw new Error(
          `replica ${replica.port} not promoted within ${timeoutMs} ms (${how} failover of ${from})`,
        );
      await sleep(50);
    }
    await settled(Math.max(1_000, deadline - Date.now()));
    return { from, to: replica.port, tookMs: Date.now() - started };
  };

  return {
    startupNodes: [...processes.keys()].map((port) => ({ host: HOST, port })),
    ports: [...processes.keys()],
    pids: () =>
      new Map(
        liveProcesses()
          .filter((p) => p.child.pid !== undefined)
          .map((p) => [p.port, p.child.pid ?? 0]),
      ),
    nodes,
    masterOf,
    admin,
    failover,
    settled,
    stop,
  };
}

/** A cluster for a describe block: started before its tests, stopped (every PID) after. */
export function redisClusterForSuite(options: ClusterOptions = {}): {
  readonly cluster: RunningCluster;
} {
  let cluster: RunningCluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster(options);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 30_000);
  return {
    get cluster() {
      if (!cluster) throw new Error("the Redis Cluster is not started yet (used outside a test)");
      return cluster;
    },
  };
}
