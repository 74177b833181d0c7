import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { FailureInjector, type FailureInjectorOptions } from "./failure-injector.js";
import { httpFault } from "./faults.js";

/** A running fake provider. */
export interface FakeProvider {
  /** Base URL, e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string;
  readonly port: number;
  /** Decides each request's fault: `provider.injector.inject("rate_limit", { first: 2 })`. */
  readonly injector: FailureInjector;
  /** Requests received on /v1/chat/completions. */
  readonly requests: number;
  /** Stops listening and drops open connections (hanging ones included). */
  close(): Promise<void>;
}

export interface FakeProviderOptions extends FailureInjectorOptions {
  /** The answer of a request without a fault (default "Hello from the fake provider."). */
  reply?: string;
  /** Defaults to 0: a free port. */
  port?: number;
}

/** Delay of the `timeout` fault when it sets none: longer than any sane client timeout. */
const DEFAULT_TIMEOUT_FAULT_MS = 600_000;

function completion(content: string) {
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 0,
    model: "fake-model",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: {
      prompt_tokens: 10,
      completion_tokens: content ? 8 : 0,
      total_tokens: content ? 18 : 10,
    },
  };
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/**
 * An OpenAI-compatible `/v1/chat/completions` server on 127.0.0.1 that serves the injector's
 * faults as real HTTP: 429 with or without Retry-After, 500/502/503, 400 context length and
 * content policy, 401, an empty answer, a body cut mid-JSON, a reset connection, a response
 * that comes too late (`timeout`) or never (`hang`). For integration tests and users' own.
 */
// Long on purpose: the server's fault table, one case per fault.
export async function startFakeProvider(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const injector = new FailureInjector(options);
  const reply = options.reply ?? "Hello from the fake provider.";
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let requests = 0;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST" || !req.url?.startsWith("/v1/chat/completions")) {
      json(res, 404, {
        error: {
          message: `no route ${req.method ?? ""} ${req.url ?? ""}`,
          type: "invalid_request_error",
          code: null,
          param: null,
        },
      });
      return;
    }
    requests++;
    req.resume(); // the body is not needed; drain it
    const { fault } = injector.next();
    if (!fault) {
      json(res, 200, completion(reply));
      return;
    }
    const http = httpFault(fault.kind, fault);
    if (http) {
      json(res, http.status, { error: http.body }, http.headers);
      return;
    }
    switch (fault.kind) {
      case "empty": {
        json(res, 200, completion(""));
        return;
      }
      case "malformed_json":
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"id":"chatcmpl-fake","choices":[{"message":');
        return;
      case "connection_reset":
        req.socket.destroy();
        return;
      case "timeout": {
        const timer = setTimeout(() => {
          timers.delete(timer);
          json(res, 200, completion(reply));
        }, fault.delayMs ?? DEFAULT_TIMEOUT_FAULT_MS);
        timers.add(timer);
        return;
      }
      default:
        // hang: never answer; close() drops the connection.
        return;
    }
  };

  const server = createServer(handle);
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    injector,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const socket of sockets) socket.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}
