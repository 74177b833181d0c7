import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { isHumanEscalationRequiredError } from "../../src/index.js";
import { Escalator } from "../../src/notify/escalator.js";
import {
  pushoverNotifier,
  slackNotifier,
  webhookNotifier,
  type Notifier,
} from "../../src/notify/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { readBody, startServer } from "../helpers/http-server.js";
import { alert } from "./alert.js";

interface Received {
  path: string;
  contentType: string | undefined;
  body: string;
}

const received: Received[] = [];

let server: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  // One real server: /ok answers 200, /fail 500, /hang never.
  server = await startServer((req, res) => {
    void readBody(req).then((body) => {
      received.push({ path: req.url ?? "", contentType: req.headers["content-type"], body });
      if (req.url?.startsWith("/hang")) return;
      res.writeHead(req.url?.startsWith("/fail") ? 500 : 200).end("ok");
    });
  });
});
afterAll(async () => {
  await server.close();
});

/** An escalator on the real clock; its notifiers' timeout far past a busy machine's delays. */
function escalator(notifiers: Notifier[], timeoutMs = 30_000) {
  const warnings: string[] = [];
  const counted: string[] = [];
  const e = new Escalator({
    notifiers,
    throttleMs: 600_000,
    timeoutMs,
    clock: systemClock,
    logger: { warn: (m) => warnings.push(m) },
    onAlert: (channel, suppressed) => counted.push(`${channel}:${String(suppressed)}`),
  });
  return { e, warnings, counted };
}

describe("notifiers against real HTTP servers on 127.0.0.1", () => {
  it("Slack incoming webhook, generic webhook and Pushover each receive their format", async () => {
    received.length = 0;
    const { e } = escalator([
      slackNotifier({ webhookUrl: `${server.url}/ok/slack` }),
      webhookNotifier({ url: `${server.url}/ok/hook`, headers: { "x-token": "t" } }),
      pushoverNotifier({ token: "app-token", user: "user-key", url: `${server.url}/ok/pushover` }),
    ]);
    await expect(e.escalate(alert)).resolves.toBe(true);
    const byPath = Object.fromEntries(received.map((r) => [r.path, r]));
    const slack = JSON.parse(byPath["/ok/slack"]?.body ?? "{}") as {
      text: string;
      blocks: unknown[];
    };
    expect(slack.text).toContain("charge is failing");
    expect(slack.blocks).toHaveLength(2);
    expect(JSON.parse(byPath["/ok/hook"]?.body ?? "{}")).toMatchObject({ ...alert, suppressed: 0 });
    const pushover = new URLSearchParams(byPath["/ok/pushover"]?.body);
    expect(byPath["/ok/pushover"]?.contentType).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(pushover)).toMatchObject({
      token: "app-token",
      user: "user-key",
      priority: "1",
    });
  });

  it("a notifier that hangs is cut by its timeout, one that answers 500 is logged; the others still deliver", async () => {
    received.length = 0;
    // A timeout of 5 s: far past what the two that answer take, even on a busy machine, so only
    // the one that hangs is cut. escalate() resolving at all says it did not wait for that one.
    const { e, warnings } = escalator(
      [
        webhookNotifier({ url: `${server.url}/hang` }),
        slackNotifier({ webhookUrl: `${server.url}/fail` }),
        webhookNotifier({ url: `${server.url}/ok/after` }),
      ],
      5_000,
    );
    await expect(e.escalate(alert)).resolves.toBe(true);
    expect(warnings).toHaveLength(2);
    expect(warnings.join("\n")).toMatch(/no answer within 5000 ms/);
    expect(warnings.join("\n")).toMatch(/HTTP 500/);
    expect(received.some((r) => r.path === "/ok/after")).toBe(true);
  });

  it("every notifier failing makes escalate() false, never a throw", async () => {
    const { e } = escalator([slackNotifier({ webhookUrl: `${server.url}/fail` })]);
    await expect(e.escalate(alert)).resolves.toBe(false);
  });
});

describe("throttle", () => {
  it("a storm of 1,000 escalations in a minute sends one message and counts the rest", async () => {
    received.length = 0;
    const { sh, clock } = virtualInstance({
      recovery: {
        plans: { SERVICE_DOWN: ["escalate_to_human"] },
        notifiers: [webhookNotifier({ url: `${server.url}/ok/storm` })],
      },
    });
    const t = sh.tool("charge", { readOnly: true }, () => Promise.reject(thrownFault("http_503")));
    const errors: unknown[] = [];
    for (let i = 0; i < 1_000; i++) {
      errors.push(await t(undefined).catch((e: unknown) => e));
      await clock.advance(60);
    }
    expect(errors.every(isHumanEscalationRequiredError)).toBe(true);
    expect(errors.filter((e) => isHumanEscalationRequiredError(e) && e.notified)).toHaveLength(1);
    expect(received.filter((r) => r.path === "/ok/storm")).toHaveLength(1);
    // Ten minutes on, the next alert of the kind goes out with the count of those suppressed.
    await clock.advance(600_000);
    await t(undefined).catch(() => undefined);
    const storm = received.filter((r) => r.path === "/ok/storm");
    expect(storm).toHaveLength(2);
    expect(JSON.parse(storm[1]?.body ?? "{}")).toMatchObject({ suppressed: 999 });
  });
});
