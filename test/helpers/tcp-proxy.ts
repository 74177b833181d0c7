/**
 * A TCP proxy on 127.0.0.1 (a free port) in front of one server, that holds every chunk it
 * forwards for `delayMs` (either way), as a slow network link would: latency added, order kept.
 * The delay can be changed while connections are open; a chunk already held keeps its release
 * time, and nothing is released before a chunk that came earlier on the same side.
 */
import { createServer, connect, type Server, type Socket } from "node:net";

export interface TcpProxy {
  /** `redis://127.0.0.1:<port>`: where clients connect instead of the server. */
  readonly url: string;
  readonly port: number;
  /** Added to every chunk, each way, ms. */
  delayMs: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Stops listening and ends every connection at once. */
  close(): Promise<void>;
}

/** One direction of one connection: chunks (or the end) released in order, each at its time. */
class DelayedPipe {
  private readonly queue: { at: number; chunk: Buffer | null }[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly to: Socket,
    private readonly delay: () => number,
  ) {}

  push(chunk: Buffer | null): void {
    const last = this.queue.at(-1)?.at ?? 0;
    this.queue.push({ at: Math.max(performance.now() + this.delay(), last), chunk });
    this.release();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }

  private release(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.queue.length > 0) {
      const head = this.queue[0];
      if (!head) break;
      const wait = head.at - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.release();
        }, Math.ceil(wait));
        return;
      }
      this.queue.shift();
      if (this.to.destroyed) continue;
      if (head.chunk === null) this.to.end();
      else this.to.write(head.chunk);
    }
  }
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const pipes = new Set<DelayedPipe>();
  let accepted = 0;
  const state = { delayMs: 0 };
  const delay = () => state.delayMs;

  const server: Server = createServer((client) => {
    accepted++;
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const up = new DelayedPipe(upstream, delay);
    const down = new DelayedPipe(client, delay);
    pipes.add(up);
    pipes.add(down);
    client.on("data", (chunk: Buffer) => {
      up.push(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      down.push(chunk);
    });
    // An end travels after the data sent before it; an error ends both sides at once.
    client.on("end", () => {
      up.push(null);
    });
    upstream.on("end", () => {
      down.push(null);
    });
    const fail = () => {
      up.stop();
      down.stop();
      client.destroy();
      upstream.destroy();
    };
    client.on("error", fail);
    upstream.on("error", fail);
    const closed = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      pipes.delete(up);
      pipes.delete(down);
    };
    client.on("close", closed);
    upstream.on("close", closed);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the proxy has no port");
  const port = address.port;

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pipe of pipes) pipe.stop();
        for (const socket of sockets) socket.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}
