import type { IncomingHttpHeaders } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  PUSHOVER_URL,
  pushoverNotifier,
  slackNotifier,
  webhookNotifier,
  type Alert,
} from "../../src/notify/index.js";
import { post } from "../../src/notify/post.js";
import { readBody, startServer } from "../helpers/http-server.js";

/**
 * What each notifier puts on the wire, byte for byte: the notifiers are called directly (no
 * escalator in between, which would redact and cut the title first), against one real server.
 */

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const received: Received[] = [];

let server: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  // /ok answers 200; /fail 500 with a body; /broken 500 whose body is cut off mid-way (the
  // connection closes after 7 of the 100 bytes it announced), so reading it fails.
  server = await startServer((req, res) => {
    void readBody(req).then((body) => {
      received.push({ path: req.url ?? "", headers: req.headers, body });
      if (req.url?.startsWith("/fail")) {
        res.writeHead(500).end("upstream exploded");
      } else if (req.url?.startsWith("/broken")) {
        res.writeHead(500, { "content-length": "100" });
        res.write("partial", () => res.destroy());
      } else {
        res.writeHead(200).end("ok");
      }
    });
  });
});
afterAll(async () => {
  await server.close();
});

const base: Alert = {
  kind: "bot/charge/SERVICE_DOWN",
  title: "bot: charge is failing (SERVICE_DOWN)",
  text: "Recovery ran out of options. Last error: HTTP 503",
  agent: "bot",
  tool: "charge",
  at: 0,
  suppressed: 0,
};

/** Sends one alert through `notifier` and returns what the server received. */
async function sent(
  notifier: { send(alert: Alert, signal: AbortSignal): Promise<void> },
  alert: Alert,
  path: string,
): Promise<Received> {
  received.length = 0;
  await notifier.send(alert, new AbortController().signal);
  const hit = received.find((r) => r.path === path);
  if (!hit) throw new Error(`nothing received on ${path}`);
  return hit;
}

describe("channel names (the escalations metric's label)", () => {
  it("slack, webhook, pushover", () => {
    expect(slackNotifier({ webhookUrl: "http://127.0.0.1:1/x" }).channel).toBe("slack");
    expect(webhookNotifier({ url: "http://127.0.0.1:1/x" }).channel).toBe("webhook");
    expect(pushoverNotifier({ token: "t", user: "u" }).channel).toBe("pushover");
  });
});

describe("Slack incoming webhook payload", () => {
  it("a header (the title cut to 150), a section (the text escaped, cut to 2,900) and no context when nothing was suppressed", async () => {
    const title = `<b> ${"t".repeat(200)}`;
    const prefix = "<!channel> a&b > c ";
    const text = prefix + "x".repeat(3_000);
    const hit = await sent(
      slackNotifier({ webhookUrl: `${server.url}/ok/slack` }),
      { ...base, title, text },
      "/ok/slack",
    );
    expect(hit.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(hit.body)).toEqual({
      text: `:rotating_light: &lt;b&gt; ${"t".repeat(200)}`,
      blocks: [
        // plain_text is shown as is: no escaping, only the cut.
        { type: "header", text: { type: "plain_text", text: title.slice(0, 150) } },
        {
          type: "section",
          text: {
            type: "mrkdwn",
            text: `&lt;!channel&gt; a&amp;b &gt; c ${"x".repeat(2_900 - prefix.length)}`,
          },
        },
      ],
    });
  });

  it("a title and text within the limits go out whole", async () => {
    const hit = await sent(
      slackNotifier({ webhookUrl: `${server.url}/ok/slack-short` }),
      base,
      "/ok/slack-short",
    );
    expect(JSON.parse(hit.body)).toEqual({
      text: `:rotating_light: ${base.title}`,
      blocks: [
        { type: "header", text: { type: "plain_text", text: base.title } },
        { type: "section", text: { type: "mrkdwn", text: base.text } },
      ],
    });
  });

  it("alerts suppressed since the last one add a context block with their count", async () => {
    const hit = await sent(
      slackNotifier({ webhookUrl: `${server.url}/ok/slack-suppressed` }),
      { ...base, suppressed: 3 },
      "/ok/slack-suppressed",
    );
    expect(JSON.parse(hit.body)).toEqual({
      text: `:rotating_light: ${base.title}`,
      blocks: [
        { type: "header", text: { type: "plain_text", text: base.title } },
        { type: "section", text: { type: "mrkdwn", text: base.text } },
        { type: "context", elements: [{ type: "mrkdwn", text: "3 similar alerts suppressed" }] },
      ],
    });
  });
});

describe("Pushover payload", () => {
  // `server` is only set in beforeAll: build the notifier when the test runs.
  const pushover = () =>
    pushoverNotifier({ token: "app-token", user: "user-key", url: `${server.url}/ok/pushover` });

  it("defaults to Pushover's API", () => {
    expect(PUSHOVER_URL).toBe("https://api.pushover.net/1/messages.json");
  });

  it("a form with the title cut to 250 and the text as the message", async () => {
    const title = "T".repeat(300);
    const hit = await sent(pushover(), { ...base, title }, "/ok/pushover");
    expect(hit.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(new URLSearchParams(hit.body))).toEqual({
      token: "app-token",
      user: "user-key",
      title: "T".repeat(250),
      message: base.text,
      priority: "1",
    });
  });

  it("the count of suppressed alerts follows the text", async () => {
    const hit = await sent(pushover(), { ...base, suppressed: 4 }, "/ok/pushover");
    expect(new URLSearchParams(hit.body).get("message")).toBe(
      `${base.text}\n(4 similar suppressed)`,
    );
  });

  it("the message, count included, is cut to 1,024 characters", async () => {
    const text = "m".repeat(1_020);
    const hit = await sent(pushover(), { ...base, text, suppressed: 12 }, "/ok/pushover");
    expect(new URLSearchParams(hit.body).get("message")).toBe(`${text}\n(12`);
  });
});

describe("generic webhook payload", () => {
  it("the alert as JSON, with the caller's headers", async () => {
    const alert = { ...base, suppressed: 2 };
    const hit = await sent(
      webhookNotifier({ url: `${server.url}/ok/hook`, headers: { "x-token": "t" } }),
      alert,
      "/ok/hook",
    );
    expect(hit.headers["content-type"]).toBe("application/json");
    expect(hit.headers["x-token"]).toBe("t");
    expect(JSON.parse(hit.body)).toEqual(alert);
  });
});

describe("post(): a failed delivery's error", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("names the origin only (never the path or query, often the secret) and the answer's body", async () => {
    const error = await post(
      `${server.url}/fail/services/T000/B000/secret?token=abc`,
      "{}",
      "application/json",
      new AbortController().signal,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(`${server.url} answered HTTP 500: upstream exploded`);
  });

  it("an answer whose body cannot be read is reported without it", async () => {
    const error = await post(
      `${server.url}/broken`,
      "{}",
      "application/json",
      new AbortController().signal,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(`${server.url} answered HTTP 500: `);
  });

  it("a URL with no origin to show is called the notifier URL", async () => {
    // Node's fetch and URL parse alike, so only a fetch that accepts what URL rejects (a relative
    // URL against a base, as in a browser) reaches this: stubbed here.
    const calls: string[] = [];
    vi.stubGlobal("fetch", (url: string) => {
      calls.push(url);
      return Promise.resolve(new Response("no such hook", { status: 404 }));
    });
    const error = await post(
      "/hooks/secret",
      "{}",
      "application/json",
      new AbortController().signal,
    ).catch((e: unknown) => e);
    expect(calls).toEqual(["/hooks/secret"]);
    expect((error as Error).message).toBe("the notifier URL answered HTTP 404: no such hook");
  });
});
