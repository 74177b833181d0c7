/**
 * Secret shapes users actually leak into error text, each driven through a real instance and
 * looked for in every sink selfheal writes text to: spans (attributes, events, status), the
 * recovery event log (JSONL) and every emitted event, status(), drift samples, the
 * escalateUnknown text, notifier bodies (memory, Slack, webhook, Pushover), the logger and
 * selfheal's own error messages. And near misses that must come through untouched.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createSelfHealing,
  HttpResponseError,
  isSelfHealConfigError,
  type SelfHealingOptions,
} from "../../src/index.js";
import { pushoverNotifier, slackNotifier, webhookNotifier } from "../../src/notify/index.js";
import type { Alert, Notifier } from "../../src/notify/notifier.js";
import { redact } from "../../src/telemetry/redact.js";
import { VirtualClock } from "../../src/testing/index.js";
import { recordingProvider } from "../helpers/otel.js";

interface Shape {
  /** What the secret is. */
  name: string;
  /** Text around and including it, as an error, a body or an argument carries it. */
  text: string;
  /** Fragments that must appear in no sink. */
  leaks: string[];
}

const PEM_BODY = "MIIEowIBAAKCAQEAq7BFUSAmTz0vCkTn6bW2g8FhSAmPLe5HqN3tnxYQm";
const PEM_TAIL = "Zx4Kq0Jp2Lr8Ws6Yv1Bt3Nc5Dm7Fh9Gj0Hk2Ml4Np6Qr8Ts0Uv2Wx4Yz6";

/** At least 30 shapes; fake values in the real formats. */
const SHAPES: Shape[] = [
  {
    name: "Authorization: Bearer",
    text: "Authorization: Bearer Zm9vYmFyLXRva2VuLTEyMzQ1Njc4OTA",
    leaks: ["Zm9vYmFyLXRva2VuLTEyMzQ1Njc4OTA"],
  },
  {
    name: "Authorization: Basic",
    text: "Authorization: Basic dXNlcjpodW50ZXIy",
    leaks: ["dXNlcjpodW50ZXIy"],
  },
  {
    name: "OpenAI project key",
    text: "Incorrect API key provided: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUvWx",
    leaks: ["Ab3dEf6hIj9kLm2nOp5qRs8tUvWx"],
  },
  {
    name: "Anthropic key",
    text: "x-api-key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345 rejected",
    leaks: ["AbCdEfGhIjKlMnOpQrStUvWxYz012345"],
  },
  {
    name: "Google API key in a query string",
    text: "GET https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    leaks: ["SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"],
  },
  {
    name: "Slack bot token",
    text: "slack auth xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    leaks: ["1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
  },
  {
    name: "Slack webhook URL",
    text: "POST https://hooks.slack.com/services/T0123ABCD/B0456EFGH/AbCdEfGhIjKlMnOpQrStUvWx failed",
    leaks: ["B0456EFGH", "AbCdEfGhIjKlMnOpQrStUvWx"],
  },
  {
    name: "Discord webhook URL",
    text: "https://discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz-0123456789",
    leaks: ["123456789012345678", "AbCdEfGhIjKlMnOpQrStUvWxYz-0123456789"],
  },
  {
    name: "GitHub classic token",
    text: "git push with ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    leaks: ["abcdefghijklmnopqrstuvwxyz0123456789"],
  },
  {
    name: "GitHub fine-grained token",
    text: "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU",
    leaks: ["11ABCDEFG0123456789", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF"],
  },
  {
    name: "GitLab personal access token",
    text: "gitlab says 401 for glpat-Xy9Zab3Cd4Ef5Gh6Ij7K",
    leaks: ["Xy9Zab3Cd4Ef5Gh6Ij7K"],
  },
  {
    name: "AWS access key id",
    text: "The AWS Access Key Id AKIAIOSFODNN7EXAMPLE does not exist in our records",
    leaks: ["AKIAIOSFODNN7EXAMPLE"],
  },
  {
    name: "AWS secret access key",
    text: "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    leaks: ["wJalrXUtnFEMI", "bPxRfiCYEXAMPLEKEY"],
  },
  {
    name: "Stripe live key",
    text: "stripe: sk_live_51AbCdEfGhIjKlMnOpQrStUv",
    leaks: ["51AbCdEfGhIjKlMnOpQrStUv"],
  },
  {
    name: "Stripe webhook secret",
    text: "signature check with whsec_AbCdEfGhIjKlMnOpQrStUvWx0123456789",
    leaks: ["AbCdEfGhIjKlMnOpQrStUvWx0123456789"],
  },
  {
    name: "Hugging Face token",
    text: "hub rejected hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    leaks: ["AbCdEfGhIjKlMnOpQrStUvWxYz01234567"],
  },
  {
    name: "SendGrid key",
    text: "sendgrid SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfG",
    leaks: ["SG.AbCdEfGhIjKlMnOpQrStUv", "Yz0123456789AbCdEfG"],
  },
  {
    name: "npm token",
    text: "npm ERR! 403 with npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    leaks: ["AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"],
  },
  {
    name: "Google OAuth access token",
    text: "oauth2 ya29.a0AfH6SMBx3kTz9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk expired",
    leaks: ["a0AfH6SMBx3kTz9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk"],
  },
  {
    name: "Telegram bot token",
    text: "telegram https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
    leaks: ["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"],
  },
  {
    name: "JSON Web Token",
    text: "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    leaks: ["eyJzdWIiOiIxMjM0NTY3ODkwIn0", "dozjgNryP4J3jVmNHl0w5N"],
  },
  {
    name: "quoted password with spaces",
    text: 'login failed: password="correct horse battery staple" for admin',
    leaks: ["correct", "horse", "battery", "staple"],
  },
  {
    name: "JSON inside a JSON string (escaped quotes)",
    text: '{"error":"bad body {\\"password\\":\\"s3cr3t value here\\",\\"user\\":\\"bob\\"}"}',
    leaks: ["s3cr3t", "value here"],
  },
  {
    name: "client_secret in a form body",
    text: "POST /oauth/token client_id=app&client_secret=Qm9hcmRHYW1lcw42&grant_type=client_credentials",
    leaks: ["Qm9hcmRHYW1lcw42"],
  },
  { name: "pwd", text: "ldap bind pwd=Tr0ub4dor3x failed", leaks: ["Tr0ub4dor3x"] },
  {
    name: "secret_key in YAML",
    text: "config error near secret_key: 9d8c7b6a5f4e3d2c1b0a",
    leaks: ["9d8c7b6a5f4e3d2c1b0a"],
  },
  {
    name: "credentials object",
    text: 'credentials={"username":"svc","password":"pa55 w0rd"} rejected',
    leaks: ["pa55", "w0rd", "svc"],
  },
  {
    name: "session_token",
    text: "session_token=FwoGZXIvYXdzEBYaDHqa0AP1 has expired",
    leaks: ["FwoGZXIvYXdzEBYaDHqa0AP1"],
  },
  {
    name: "Cookie header",
    text: "request headers: Cookie: sid=s%3Aabc123def456; csrftoken=9f8e7d6c5b",
    leaks: ["abc123def456", "9f8e7d6c5b"],
  },
  {
    name: "Set-Cookie header",
    text: "response Set-Cookie: session=eyJ1c2VyIjoiYm9iIn0; Path=/; HttpOnly",
    leaks: ["eyJ1c2VyIjoiYm9iIn0"],
  },
  {
    name: "URL with user and password",
    text: "connect postgres://app:hunter2pass@db.internal:5432/orders failed",
    leaks: ["hunter2pass"],
  },
  {
    name: "URL with a password and no user",
    text: "redis://:s3cretRedisPass@cache.internal:6379/0 refused",
    leaks: ["s3cretRedisPass"],
  },
  {
    name: "Visa number, grouped",
    text: "charge for card 4111 1111 1111 1111 declined (exp 12/29)",
    leaks: ["4111 1111 1111 1111", "1111 1111 1111"],
  },
  {
    name: "Mastercard number, dashed",
    text: "card=5555-5555-5555-4444 declined",
    leaks: ["5555-5555-5555-4444", "5555-4444"],
  },
  {
    name: "Amex number, plain",
    text: "payment method 378282246310005 was declined",
    leaks: ["378282246310005"],
  },
  {
    name: "PEM private key block",
    text: `key load failed: -----BEGIN RSA PRIVATE KEY-----\n${PEM_BODY}\n${PEM_TAIL}\n-----END RSA PRIVATE KEY----- (bad padding)`,
    leaks: [PEM_BODY.slice(0, 24), PEM_TAIL.slice(10, 40), "END RSA PRIVATE"],
  },
  {
    name: "PEM private key in a service-account JSON",
    text: `{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\\n${PEM_BODY}\\n-----END PRIVATE KEY-----\\n"}`,
    leaks: [PEM_BODY.slice(0, 24), PEM_BODY.slice(30)],
  },
  {
    name: "email address",
    text: "no mailbox for ops.team+alerts@example.co.uk",
    leaks: ["ops.team+alerts@example.co.uk", "ops.team"],
  },
  {
    name: "X-Api-Key header",
    text: "sent X-Api-Key: Xk9pQ2rT5vW8yZ1b to upstream",
    leaks: ["Xk9pQ2rT5vW8yZ1b"],
  },
  {
    name: "hex API key",
    text: "datadog rejected key 0123456789abcdef0123456789abcdef",
    leaks: ["0123456789abcdef0123456789abcdef"],
  },
  {
    name: "random base64 blob",
    text: "signature blob 7Hq2LmN9pX4vR8sT1wZ6yB3cD5fG0jK2mP9qS4uV did not verify",
    leaks: ["7Hq2LmN9pX4vR8sT1wZ6yB3cD5fG0jK2mP9qS4uV"],
  },
  {
    name: "Azure storage connection string",
    text: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bXlTZWNyZXRLZXk9PQ==;EndpointSuffix=core.windows.net",
    leaks: ["bXlTZWNyZXRLZXk9PQ"],
  },
  {
    name: "Azure SAS signature",
    text: "GET https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig=AbCd%2BEf0123456789xyz%3D 403",
    leaks: ["AbCd%2BEf0123456789xyz"],
  },
  {
    name: "Python dict repr",
    text: "bad config {'api_key': 'abc 123 def', 'region': 'eu'}",
    leaks: ["abc 123", "123 def"],
  },
  {
    name: "environment variable",
    text: "OPENAI_API_KEY=not-a-real-key-but-secret is not valid",
    leaks: ["not-a-real-key-but-secret"],
  },
];

/**
 * Must come through unchanged: not secrets, and what a reader needs. Decisions: UUIDs and hex
 * shorter than 32 (short shas, OpenAI `req_` ids) stay; 16-digit numbers failing Luhn stay.
 */
const NEAR_MISSES = [
  "order 4111111111111112 failed", // card-like, fails Luhn
  "order id 20240115000123 not found", // card-length, fails Luhn
  "order 6011000990139425 refunded", // Discover-like, fails Luhn
  "timestamp 1700000000000 out of range", // 13 digits, no card prefix
  "    at fn (/home/app/node_modules/x/index.js:12:5)",
  "    at Object.<anonymous> (/home/runner/work/my-project/my-project/node_modules/@scope/package-name/dist/commonjs/index.js:120:15)",
  "cannot open /srv/app/node_modules/some-package-name/dist/commonjs/internal/helpers/index.js",
  "s3://my-bucket/path/to/object-2024-01-15.json not found",
  "the password you entered is wrong",
  "invalid password: must be at least 12 characters",
  "Password reset required for this account",
  "the secret to good retries is jitter",
  "token expired, please sign in again",
  "Unexpected token < in JSON at position 0",
  "Bearer authentication failed",
  "request 550e8400-e29b-41d4-a716-446655440000 failed", // UUID
  "commit 9f86d08 broke the build", // short sha
  "sha256 of the file did not match (expected 9f86d081)",
  "request_id=req_5f7b0f8f0b6a4c9e8a8e5d8f0b6a4c9e", // OpenAI request id
  "model gpt-4o-2024-08-06 is overloaded",
  "Rate limit reached for gpt-4o in organization org-AbC123 on tokens per min (TPM): Limit 30000, Used 29850, Requested 500.",
  "getUserAccountBalanceForCustomerId2WithRetries failed", // long camelCase identifier
  "Supercalifragilisticexpialidocious_Antidisestablishmentarianism",
  "max_tokens=4096 exceeds the context length",
  "user=bob host=db.internal port=5432",
  "tokens: 4096, key: user:42",
  "connect ECONNREFUSED 10.0.0.12:443",
  "postgres://app@db.internal:5432/orders", // a user is not a secret
];

const EVENTS = [
  "status-change",
  "tool-call",
  "diagnosis",
  "diagnoser-drift",
  "diagnosis-advice",
  "recovery",
  "circuit-change",
  "warmup",
] as const;

/** Every string inside `value` (objects, arrays, JSON text parsed), to search as plain text. */
function strings(value: unknown, into: string[] = [], depth = 0): string[] {
  if (depth > 12) return into;
  if (typeof value === "string") {
    into.push(value);
    const t = value.trim();
    if (t.startsWith("{") || t.startsWith("[")) {
      try {
        strings(JSON.parse(t), into, depth + 1);
      } catch {
        // not JSON
      }
    }
  } else if (Array.isArray(value)) {
    for (const v of value) strings(v, into, depth + 1);
  } else if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) strings(v, into, depth + 1);
  }
  return into;
}

const settled = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ rejected: false, value }),
    (value: unknown) => ({ rejected: true, value }),
  );

const otel = recordingProvider();
let dir: string;
const bodies: string[] = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-redaction-"));
  // The real Slack, webhook and Pushover notifiers build their bodies; fetch keeps them here.
  vi.spyOn(globalThis, "fetch").mockImplementation((_url, init) => {
    const body = typeof init?.body === "string" ? init.body : "";
    bodies.push(body);
    return Promise.resolve(new Response("ok"));
  });
});
afterAll(async () => {
  vi.restoreAllMocks();
  await rm(dir, { recursive: true, force: true });
});

/** Every sink's text after one UNKNOWN failure and one escalated 503, both carrying `text`. */
async function sinks(text: string, n: number): Promise<Record<string, string[]>> {
  otel.reset();
  bodies.length = 0;
  const clock = new VirtualClock();
  const lines: string[] = [];
  const advisorTexts: string[] = [];
  const alerts: Alert[] = [];
  const events: unknown[] = [];
  const eventLog = join(dir, `case-${String(n)}.jsonl`);
  const memory: Notifier = {
    channel: "memory",
    send: (a) => Promise.resolve(void alerts.push(a)),
  };
  const failing: Notifier = {
    channel: "failing",
    send: () => Promise.reject(new Error(`gateway echoed the alert: ${text}`)),
  };
  const options: SelfHealingOptions = {
    agent: "corpus",
    clock,
    tracerProvider: otel.provider,
    logger: { warn: (m) => lines.push(m) },
    recordArguments: true,
    diagnosis: {
      // One rule, so wording in a shape ("Incorrect API key") never turns the first call from
      // UNKNOWN (drift sample, advisor) into something else: every sink sees every shape.
      rules: [
        { name: "http-503", pattern: "SERVICE_DOWN", confidence: 0.9, match: { status: [503] } },
      ],
      drift: { minSamples: 1 },
      escalateUnknown: (_error, { text: seen }) => {
        advisorTexts.push(seen);
        return { pattern: "UNKNOWN", note: `the advisor read: ${seen}` };
      },
    },
    recovery: {
      random: () => 0,
      eventLog,
      plans: { SERVICE_DOWN: ["escalate_to_human"], UNKNOWN: [] },
      notifiers: [
        memory,
        slackNotifier({ webhookUrl: "https://hooks.slack.invalid/services/T0/B0/x" }),
        webhookNotifier({ url: "https://hooks.invalid/alerts" }),
        pushoverNotifier({ token: "app", user: "user", url: "https://pushover.invalid/1" }),
        failing,
      ],
    },
  };
  const sh = createSelfHealing(options);
  for (const name of EVENTS) sh.on(name, (e: unknown) => events.push(e));
  sh.on("tool-call", () => {
    throw new Error(`listener broke on: ${text}`); // a logger line carrying the text
  });
  const lookup = sh.tool("lookup", { readOnly: true }, () =>
    Promise.reject(new Error(`lookup failed: ${text}`)),
  );
  const charge = sh.tool("charge", { readOnly: true }, () =>
    Promise.reject(
      new HttpResponseError(503, new Headers(), `upstream said: ${text}`, "https://api.invalid"),
    ),
  );
  await clock.run(settled(lookup({ note: text })));
  const escalated = await clock.run(settled(charge({ note: text })));
  await clock.advance(10_000); // the advisor and the notifiers finish
  const status = await sh.status();
  const samples = sh.unknownSamples();
  await sh.close();
  const closed = await settled(sh.task(`task for ${text}`, () => undefined));
  let config: unknown;
  try {
    createSelfHealing({ agent: "a", recordArguments: text as unknown as boolean });
  } catch (e) {
    config = e;
  }
  const ownErrors = [escalated.value, closed.value, config].flatMap((e) => {
    const cause = (e as { cause?: unknown }).cause;
    return [e, cause].map((x) => (x instanceof Error ? x.message : ""));
  });
  expect(isSelfHealConfigError(config)).toBe(true);

  const spans = otel.spans();
  return {
    "span attributes": strings(spans.map((s) => s.attributes)),
    "span events": strings(spans.map((s) => s.events.map((e) => e.attributes))),
    "span status": strings(spans.map((s) => s.status.message ?? "")),
    "event log (JSONL)": (await readFile(eventLog, "utf8")).split("\n").filter(Boolean),
    "emitted events": strings(events),
    "status()": strings(status),
    unknownSamples: strings(samples),
    escalateUnknown: advisorTexts,
    "notifier alerts": strings(alerts),
    "notifier bodies": bodies.flatMap((b) => [
      b,
      ...strings(b),
      ...[...new URLSearchParams(b).values()],
    ]),
    logger: lines,
    "selfheal error messages": ownErrors,
  };
}

/** Sinks that carry the error text, so must show a redaction marker (a silent sink proves nothing). */
const CARRIERS = [
  "span attributes",
  "span events",
  "span status",
  "event log (JSONL)",
  "emitted events",
  "unknownSamples",
  "escalateUnknown",
  "notifier alerts",
  "notifier bodies",
  "logger",
];

describe("redaction corpus: every secret shape, every sink", () => {
  it("covers at least 30 shapes", () => {
    expect(SHAPES.length).toBeGreaterThanOrEqual(30);
  });

  it.each(SHAPES.map((s, i) => [s.name, s, i] as const))("%s", async (_name, shape, i) => {
    const found = await sinks(shape.text, i);
    const leaked: string[] = [];
    for (const [sink, texts] of Object.entries(found)) {
      for (const fragment of shape.leaks) {
        if (texts.some((t) => t.includes(fragment))) leaked.push(`${sink}: ${fragment}`);
      }
    }
    expect(leaked).toEqual([]);
    const silent = CARRIERS.filter((sink) => !found[sink]?.some((t) => t.includes("[REDACTED")));
    expect(silent).toEqual([]);
    // Log lines and JSONL events stay one line each.
    for (const line of [...(found.logger ?? []), ...(found["event log (JSONL)"] ?? [])])
      expect(line).not.toMatch(/[\n\r]/);
  });
});

describe("near misses stay readable", () => {
  it.each(NEAR_MISSES)("%s", async (text) => {
    expect(redact(text)).toBe(text);
    otel.reset();
    const clock = new VirtualClock();
    const sh = createSelfHealing({
      agent: "near",
      clock,
      tracerProvider: otel.provider,
      logger: { warn: () => undefined },
    });
    const tool = sh.tool("t", { readOnly: true }, () => Promise.reject(new Error(text)));
    await clock.run(settled(tool(undefined)));
    const span = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(span?.status.message).toBe(text);
    await sh.close();
  });
});

describe("redact", () => {
  it("is idempotent on every shape and near miss", () => {
    for (const text of [...SHAPES.map((s) => s.text), ...NEAR_MISSES]) {
      const once = redact(text);
      expect(redact(once)).toBe(once);
    }
  });
});
