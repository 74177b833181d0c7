/**
 * Names and error text carrying newlines, carriage returns, terminal escape sequences and bidi
 * overrides cannot forge a log line, split a JSONL event or drive a terminal.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  CircuitOpenError,
  createSelfHealing,
  HttpResponseError,
  SelfHealClosedError,
  SelfHealConfigError,
  ToolTimeoutError,
} from "../../src/index.js";
import { Escalator } from "../../src/notify/escalator.js";
import { slackNotifier } from "../../src/notify/index.js";
import { escapeControl, oneLine, redact } from "../../src/telemetry/redact.js";
import { VirtualClock } from "../../src/testing/index.js";
import { recordingProvider } from "../helpers/otel.js";

const ESC = "\u001b";
/** Clears the screen, moves home, recolours, sets the window title, then forges a line. */
const PAYLOAD = `${ESC}[2J${ESC}[H${ESC}[31mred${ESC}[0m${ESC}]0;pwned\u0007\r\nselfheal: all healthy\u2028\u202e`;
const FORBIDDEN = [ESC, "\u0007", "\r", "\u2028", "\u202e"];

const settled = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ rejected: false, value }),
    (value: unknown) => ({ rejected: true, value }),
  );

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-control-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("escapeControl and oneLine", () => {
  it("make every control character visible; escapeControl keeps line feeds and tabs", () => {
    expect(escapeControl("a\tb\nc\r\nd\re\u0000f\u007f\u0085\u009b")).toBe(
      "a\tb\nc\nd\\re\\x00f\\x7f\\x85\\x9b",
    );
    expect(oneLine("a\tb\nc\r\nd")).toBe("a\\tb\\nc\\r\\nd");
    expect(oneLine("\u2028\u2029\u202a\u202e\u2066\u2069")).toBe(
      "\\u2028\\u2029\\u202a\\u202e\\u2066\\u2069",
    );
    expect(oneLine("plain text, ünïcödé, emoji 🚨")).toBe("plain text, ünïcödé, emoji 🚨");
  });

  it("redact escapes them too, after the patterns (an escape cannot hide a secret)", () => {
    const out = redact(`${PAYLOAD} password=hunter22`);
    for (const c of FORBIDDEN) expect(out).not.toContain(c);
    expect(out).toContain("\\x1b[2J");
    expect(out).toContain("password=[REDACTED]");
  });
});

describe("sinks", () => {
  it("log lines stay one line each; the JSONL log one event a line; spans carry no escapes", async () => {
    const otel = recordingProvider();
    const clock = new VirtualClock();
    const lines: string[] = [];
    const eventLog = join(dir, "events.jsonl");
    const sh = createSelfHealing({
      agent: "a",
      clock,
      tracerProvider: otel.provider,
      logger: { warn: (m) => lines.push(m) },
      recovery: { random: () => 0, eventLog, plans: { UNKNOWN: [] }, providers: [{ name: "p" }] },
    });
    sh.on("tool-call", () => {
      throw new Error(`listener: ${PAYLOAD}`);
    });
    // A tool name with a payload, listing its provider twice: a warning that names the tool.
    const name = `lookup${PAYLOAD}`;
    const tool = sh.tool(name, { readOnly: true, providers: ["p", "p"] }, () =>
      Promise.reject(new Error(`failed: ${PAYLOAD}`)),
    );
    await clock.run(settled(tool(undefined)));
    await clock.run(settled(tool(undefined)));
    await sh.close();

    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.find((l) => l.includes("more than once"))).toContain("lookup\\x1b[2J");
    for (const line of lines) {
      expect(line).not.toContain("\n");
      for (const c of FORBIDDEN) expect(line).not.toContain(c);
    }
    const log = await readFile(eventLog, "utf8");
    const all = log.split("\n").filter(Boolean); // recovery events, calls and settings lines
    for (const line of all)
      for (const c of ["\r", "\u2028", "\u0085"]) expect(line).not.toContain(c);
    const events = all.filter((l) => (JSON.parse(l) as { type?: string }).type === undefined);
    expect(events).toHaveLength(2);
    for (const line of events) {
      const event = JSON.parse(line) as { tool: string; error: string };
      expect(event.tool).toBe(name); // the name is data, kept as given (JSON escapes it)
      for (const c of FORBIDDEN) expect(event.error).not.toContain(c);
    }
    // Python's splitlines (and editors) also break on U+2028/U+2029/U+0085: still one per event.
    // eslint-disable-next-line no-control-regex
    const anyBreak = /\r\n|[\n\r\u000b\u000c\u001c-\u001e\u0085\u2028\u2029]/;
    expect(log.split(anyBreak).filter(Boolean)).toHaveLength(all.length);
    for (const span of otel.spans()) {
      for (const c of FORBIDDEN) expect(span.status.message ?? "").not.toContain(c);
    }
  });

  it("a logger that throws never breaks the call", async () => {
    const clock = new VirtualClock();
    const sh = createSelfHealing({
      agent: "a",
      clock,
      logger: {
        warn: () => {
          throw new Error("logger down");
        },
      },
      recovery: { plans: { UNKNOWN: [] } },
    });
    sh.on("tool-call", () => {
      throw new Error("listener down"); // logged, and the logger throws
    });
    const boom = new Error("tool failed");
    const tool = sh.tool("t", { readOnly: true }, () => Promise.reject(boom));
    const outcome = await clock.run(settled(tool(undefined)));
    expect(outcome).toEqual({ rejected: true, value: boom });
    await sh.close();
  });

  it("selfheal's own messages keep names on one line, and redact text that may carry user data", () => {
    const name = `t${PAYLOAD}`;
    for (const error of [
      new ToolTimeoutError(name, 5),
      new CircuitOpenError(name, 1000),
      new SelfHealConfigError(name, `bad value ${PAYLOAD} password=hunter22`),
      new SelfHealClosedError(`task("${PAYLOAD} password=hunter22") was started`),
      new HttpResponseError(500, new Headers(), `body ${PAYLOAD} password=hunter22`, "https://x"),
    ]) {
      for (const c of [...FORBIDDEN, "\n"]) expect(error.message).not.toContain(c);
      expect(error.message).not.toContain("hunter22");
    }
    expect(new ToolTimeoutError(name, 5).tool).toBe(name); // the field keeps the real name
  });

  it("Slack gets error text shown, not obeyed: no @channel pings, no disguised links", async () => {
    const bodies: string[] = [];
    const fetch = vi.spyOn(globalThis, "fetch").mockImplementation((_url, init) => {
      bodies.push(typeof init?.body === "string" ? init.body : "");
      return Promise.resolve(new Response("ok"));
    });
    try {
      const escalator = new Escalator({
        notifiers: [slackNotifier({ webhookUrl: "https://hooks.slack.invalid/x" })],
        throttleMs: 1,
        timeoutMs: 1000,
        clock: new VirtualClock(),
        logger: { warn: () => undefined },
        onAlert: () => undefined,
      });
      await escalator.escalate({
        kind: "k",
        title: `a <!channel> ${PAYLOAD}`,
        text: `Last error: <!channel> <https://evil.invalid|docs> & ${PAYLOAD}`,
        agent: "a",
        tool: "t",
        at: 0,
      });
      const body = JSON.parse(bodies[0] ?? "{}") as {
        text: string;
        blocks: { text?: { text: string } }[];
      };
      const mrkdwn = body.blocks[1]?.text?.text ?? "";
      expect(mrkdwn).toContain("&lt;!channel&gt; &lt;https://evil.invalid|docs&gt; &amp;");
      expect(body.text).not.toContain("<!channel>");
      for (const text of [mrkdwn, body.text, body.blocks[0]?.text?.text ?? ""])
        for (const c of FORBIDDEN) expect(text).not.toContain(c);
    } finally {
      fetch.mockRestore();
    }
  });
});
