/**
 * No promise of the breaker channel's connection rejects unhandled when Redis goes away and comes
 * back: an unhandled rejection crashes a user's process (Node's default), so "Redis was killed"
 * must never end the agent. Real `redis-server`, killed and restarted empty by its PID; the
 * sync's subscriber is closed, or Redis stopped, at the moment it is ready again.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { redisStore, type RedisSignalStore } from "../../src/redis/index.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { sleep, waitFor } from "../helpers/wait.js";

const available = haveRedis("no unhandled rejection from the breaker channel");

describe.skipIf(!available)("the breaker channel's connection after Redis is back", () => {
  let redis: RunningRedis;
  let admin: Redis;
  const rejections: unknown[] = [];
  const record = (reason: unknown) => {
    rejections.push(reason);
  };

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on("error", () => undefined);
    process.on("unhandledRejection", record);
  });
  afterAll(async () => {
    process.off("unhandledRejection", record);
    admin.disconnect();
    await redis.stop();
  });

  /**
   * A store listening for verdicts through a proxy (to slow or cut the link at will), and the
   * subscriber the sync opens (its client's duplicate): subscribed, then Redis killed and
   * restarted empty; `atReady` runs the moment the subscriber is connected again.
   */
  async function reconnected(
    prefix: string,
    atReady: (s: Reconnected) => void,
  ): Promise<Reconnected> {
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
    const client = new Redis(proxy.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 300,
      retryStrategy: () => 50,
    });
    client.on("error", () => undefined);
    const duplicate = vi.spyOn(client, "duplicate");
    const store = redisStore({
      client,
      prefix,
      commandTimeoutMs: 300,
      logger: { warn: () => undefined },
    });
    store.fleet.attach(() => undefined);
    const subscriber = duplicate.mock.results[0]?.value as Redis;
    const subscribed = async () => {
      const [, n] = (await admin.pubsub("NUMSUB", store.fleet.breakerChannel)) as [string, number];
      return n === 1;
    };
    await waitFor(subscribed);
    const s = { store, subscriber, proxy, subscribed };
    await redis.kill();
    // ioredis has written its SUBSCRIBE again when "ready" is emitted; its answer is not back.
    subscriber.once("ready", () => {
      atReady(s);
    });
    await redis.restart();
    return s;
  }
  interface Reconnected {
    store: RedisSignalStore;
    subscriber: Redis;
    proxy: TcpProxy;
    subscribed: () => Promise<boolean>;
  }

  /** The messages of what rejected unhandled, once it has had time to (the command timeout). */
  async function unhandled(): Promise<string[]> {
    await sleep(600);
    return rejections.splice(0).map((r) => (r instanceof Error ? r.message : String(r)));
  }

  it("the link slows past the command timeout as it reconnects: nothing rejects unhandled", async () => {
    const s = await reconnected("unhandled-slow", ({ proxy }) => {
      proxy.delayMs = 1_000; // the SUBSCRIBE's answer comes after its command timeout
    });
    await waitFor(() => s.proxy.delayMs > 0);
    const found = await unhandled();
    s.proxy.delayMs = 0;
    await waitFor(s.subscribed); // subscribed again once the link is back
    await s.store.close();
    await s.proxy.close();
    expect(found).toEqual([]);
  }, 60_000);

  it("closed, and the link cut, as it reconnects: nothing rejects unhandled", async () => {
    let cut: Promise<void> | undefined;
    const s = await reconnected("unhandled-close", ({ store, proxy }) => {
      proxy.delayMs = 1_000;
      store.fleet.close(); // the agent shuts down...
      cut = proxy.close(); // ...and the connection drops before the SUBSCRIBE is answered
    });
    await waitFor(() => cut !== undefined);
    await cut;
    await waitFor(() => s.subscriber.status === "end");
    const found = await unhandled();
    await s.store.close();
    expect(found).toEqual([]);
  }, 60_000);
});
