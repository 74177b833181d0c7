import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { StatusPageClient } from "../../src/diagnosis/status-page.js";
import { ToolTimeoutError } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { startServer } from "../helpers/http-server.js";

type Mode = "operational" | "degraded" | "slow" | "garbage" | "500" | "no-indicator";
let mode: Mode = "operational";
let server: Awaited<ReturnType<typeof startServer>>;

beforeAll(async () => {
  // A Statuspage v2 server whose behaviour each test picks.
  server = await startServer((req, res) => {
    if (req.url !== "/api/v2/status.json") {
      res.writeHead(404).end();
      return;
    }
    const send = (indicator: string) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ page: { name: "Fake" }, status: { indicator, description: indicator } }),
      );
    };
    switch (mode) {
      case "operational": {
        send("none");
        return;
      }
      case "degraded": {
        send("major");
        return;
      }
      case "slow": // a major outage, said a minute late
        setTimeout(() => {
          send("major");
        }, 60_000).unref();
        return;
      case "garbage":
        res.writeHead(200, { "content-type": "text/html" }).end("<html>we are fine</html>");
        return;
      case "500":
        res.writeHead(500).end("oops");
        return;
      case "no-indicator":
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":{}}');
        return;
    }
  });
});
afterAll(async () => {
  await server.close();
});

describe("StatusPageClient against a real Statuspage server on 127.0.0.1", () => {
  /**
   * A client on the real clock. Its timeout is 10 s by default: pages that answer at once do so
   * well within it on a busy machine too (200 ms was not enough at load 17, issue 27).
   */
  const fresh = (timeoutMs = 10_000) => new StatusPageClient({ clock: systemClock, timeoutMs });

  it.each([
    ["operational", "operational"],
    ["degraded", "degraded"],
    ["garbage", "unknown"],
    ["500", "unknown"],
    ["no-indicator", "unknown"],
  ] as const)("%s page -> %s", async (m, expected) => {
    mode = m;
    expect(await fresh().state(server.url)).toBe(expected);
  });

  it("a slow page counts as unknown after the timeout", async () => {
    mode = "slow";
    // Waiting for the page would have read its answer, a major outage ("degraded"), a minute
    // later: "unknown" is the 200 ms timeout's verdict, however busy the machine (issue 27).
    expect(await fresh(200).state(server.url)).toBe("unknown");
  });

  it("a page that is down (nothing listening) counts as unknown", async () => {
    const closed = await startServer(() => undefined);
    await closed.close();
    expect(await fresh().state(closed.url)).toBe("unknown");
  });

  it("concurrent reads share one request, and answers are cached for 30 s", async () => {
    mode = "degraded";
    const clock = new VirtualClock();
    const client = new StatusPageClient({ clock });
    const hitsBefore = server.hits;
    const states = await Promise.all(Array.from({ length: 20 }, () => client.state(server.url)));
    expect(new Set(states)).toEqual(new Set(["degraded"]));
    expect(server.hits - hitsBefore).toBe(1);
    mode = "operational";
    await clock.advance(29_000);
    expect(await client.state(server.url)).toBe("degraded");
    await clock.advance(1_000);
    expect(await client.state(server.url)).toBe("operational");
    expect(server.hits - hitsBefore).toBe(2);
  });
});

describe("status pages in diagnosis", () => {
  it("a timeout while the provider's page reports an incident is SERVICE_DOWN; otherwise TIMEOUT", async () => {
    const { sh } = virtualInstance({ diagnosis: { statusPages: { openai: server.url } } });
    const timeout = new ToolTimeoutError("complete", 30_000);
    mode = "degraded";
    expect(await sh.diagnose(timeout, { tool: "complete", provider: "openai" })).toMatchObject({
      pattern: "SERVICE_DOWN",
      rule: "timeout-during-incident",
      statusPage: "degraded",
    });
    // A tool with no page configured never waits on one.
    expect(await sh.diagnose(timeout, { tool: "other" })).toMatchObject({
      pattern: "TIMEOUT",
      statusPage: "unknown",
    });
  });

  it("a broken page never turns a timeout into an outage", async () => {
    mode = "garbage";
    const { sh } = virtualInstance({ diagnosis: { statusPages: { complete: server.url } } });
    expect(
      await sh.diagnose(new ToolTimeoutError("complete", 1), { tool: "complete" }),
    ).toMatchObject({
      pattern: "TIMEOUT",
      statusPage: "unknown",
    });
  });

  it("a 429 never consults the status page", async () => {
    const { sh } = virtualInstance({ diagnosis: { statusPages: { complete: server.url } } });
    const hits = server.hits;
    await sh.diagnose(Object.assign(new Error("429"), { status: 429 }), { tool: "complete" });
    expect(server.hits).toBe(hits);
  });

  it("rejects a status page that is not an http(s) URL", () => {
    expect(() =>
      virtualInstance({ diagnosis: { statusPages: { openai: "status.openai.com" } } }),
    ).toThrow(/diagnosis\.statusPages\.openai/);
  });
});

describe("StatusPageClient requests (injected fetch, virtual time)", () => {
  /** A fetch that records what it was asked and answers with `answer`. */
  function fakeFetch(answer: (signal: AbortSignal) => Promise<Response>) {
    const calls: { url: string; headers: unknown; signal: AbortSignal }[] = [];
    const fetch = ((url: URL, init: RequestInit) => {
      const signal = init.signal as AbortSignal;
      calls.push({ url: String(url), headers: init.headers, signal });
      return answer(signal);
    }) as typeof globalThis.fetch;
    return { fetch, calls };
  }
  const json = (body: unknown, status = 200) =>
    Promise.resolve(
      new Response(JSON.stringify(body), {
        status,
        headers: { "content-type": "application/json" },
      }),
    );

  it.each([
    ["https://status.example.com", "https://status.example.com/api/v2/status.json"],
    ["https://status.example.com/", "https://status.example.com/api/v2/status.json"],
    ["https://example.com/openai", "https://example.com/openai/api/v2/status.json"],
    ["https://example.com/openai/", "https://example.com/openai/api/v2/status.json"],
  ])("reads %s at %s, asking for JSON", async (base, url) => {
    const f = fakeFetch(() => json({ status: { indicator: "none" } }));
    const client = new StatusPageClient({ clock: new VirtualClock(), fetch: f.fetch });
    expect(await client.state(base)).toBe("operational");
    expect(f.calls.map((c) => [c.url, c.headers])).toEqual([[url, { accept: "application/json" }]]);
  });

  it("an error status is unknown, even with an incident in its body", async () => {
    const f = fakeFetch(() => json({ status: { indicator: "major" } }, 503));
    const client = new StatusPageClient({ clock: new VirtualClock(), fetch: f.fetch });
    expect(await client.state("https://status.example.com")).toBe("unknown");
  });

  it("a page that does not answer in time is aborted with a reason naming it", async () => {
    const clock = new VirtualClock();
    const f = fakeFetch(
      (signal) =>
        new Promise((_, reject) => {
          signal.addEventListener("abort", () => {
            reject(signal.reason as Error);
          });
        }),
    );
    const client = new StatusPageClient({ clock, timeoutMs: 250, fetch: f.fetch });
    const state = client.state("https://status.example.com");
    await clock.advance(249);
    expect(f.calls[0]?.signal.aborted).toBe(false);
    await clock.advance(1);
    expect(await state).toBe("unknown");
    expect((f.calls[0]?.signal.reason as Error).message).toBe(
      "status page https://status.example.com did not answer within 250 ms",
    );
  });

  it("an answered request leaves no timer behind and is never aborted afterwards", async () => {
    const clock = new VirtualClock();
    const f = fakeFetch(() => json({ status: { indicator: "minor" } }));
    const client = new StatusPageClient({ clock, timeoutMs: 250, fetch: f.fetch });
    expect(await client.state("https://status.example.com")).toBe("degraded");
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(f.calls[0]?.signal.aborted).toBe(false);
  });
});
