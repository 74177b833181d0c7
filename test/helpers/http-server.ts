import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** A real HTTP server on 127.0.0.1 and a free port, for one test file; close() drops hung sockets. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const sockets = new Set<Socket>();
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get hits() {
      return hits;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** The whole body of a request, as text. */
export const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise<string>((resolve) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      resolve(body);
    });
  });
