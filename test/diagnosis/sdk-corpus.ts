/**
 * A corpus of real client errors: the official OpenAI, Anthropic and Google GenAI SDKs, fetch
 * (with HttpResponseError) and axios, pointed at a local server that fails the way each provider
 * documents (bodies and headers), plus connection faults (refused, reset, DNS failure, hung,
 * dropped or stalled mid-body). SDK retries are off: selfheal sees the error of one attempt.
 *
 * Each provider's SDK runs at its current major and, where the previous major is still installed
 * (the npm aliases `openai6` and `@google/genai2`), at that one too: the same cases, the same
 * requests, each SDK module building its own errors (SDKS below).
 *
 * Used by sdk-corpus.test.ts (diagnosis and recovery of each case) and bench/diagnosis.ts (the
 * cost of diagnosing the corpus).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import type { Socket } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { GoogleGenAI as GoogleGenAI2 } from "@google/genai2";
import axios from "axios";
import OpenAI from "openai";
import OpenAI6 from "openai6";
import type { Clock } from "../../src/clock.js";
import { HttpResponseError } from "../../src/errors.js";
import type { Evidence } from "../../src/diagnosis/diagnoser.js";
import type { Pattern } from "../../src/telemetry/conventions.js";

type Provider = "openai" | "anthropic" | "google";

/** A request of a case: it throws the client's own error. */
type Send = (signal?: AbortSignal) => Promise<unknown>;
interface ClientOptions {
  apiKey: string;
  baseURL: string;
  /** ms */
  timeout: number;
}
const PROMPT = "Say hello.";

/** What the corpus calls on an `openai` client: the same in majors 6 and 7. */
type OpenAIModule = new (options: {
  apiKey: string;
  baseURL: string;
  maxRetries: number;
  timeout: number;
}) => {
  chat: {
    completions: {
      create(
        body: { model: string; messages: { role: "user"; content: string }[] },
        options: { signal?: AbortSignal },
      ): PromiseLike<unknown>;
    };
  };
};
const openaiCaller =
  (Client: OpenAIModule) =>
  ({ apiKey, baseURL, timeout }: ClientOptions): Send => {
    const client = new Client({ apiKey, baseURL, maxRetries: 0, timeout });
    return async (signal) =>
      client.chat.completions.create(
        { model: "gpt-4o", messages: [{ role: "user", content: PROMPT }] },
        signal ? { signal } : {},
      );
  };

/** What the corpus calls on a `@google/genai` client: the same in majors 2 and 3. */
type GoogleGenAIModule = new (options: {
  apiKey: string;
  httpOptions: { baseUrl: string; timeout: number };
}) => {
  models: {
    generateContent(params: {
      model: string;
      contents: string;
      config: { abortSignal?: AbortSignal };
    }): Promise<unknown>;
  };
};
const googleCaller =
  (Client: GoogleGenAIModule) =>
  ({ apiKey, baseURL, timeout }: ClientOptions): Send => {
    // No retryOptions: the SDK sends one request.
    const client = new Client({ apiKey, httpOptions: { baseUrl: baseURL, timeout } });
    return (signal) =>
      client.models.generateContent({
        model: "gemini-2.0-flash",
        contents: PROMPT,
        config: signal ? { abortSignal: signal } : {},
      });
  };

const anthropicCaller = ({ apiKey, baseURL, timeout }: ClientOptions): Send => {
  const client = new Anthropic({ apiKey, baseURL, maxRetries: 0, timeout });
  return (signal) =>
    client.messages.create(
      { model: "claude-haiku-4-5", max_tokens: 64, messages: [{ role: "user", content: PROMPT }] },
      signal ? { signal } : {},
    );
};

/**
 * The provider SDKs the corpus runs on, by client name: the package (its folder under
 * node_modules/, an npm alias for a previous major) and how a request is made with it.
 */
const SDKS = {
  openai: { provider: "openai", pkg: "openai", caller: openaiCaller(OpenAI) },
  openai6: {
    provider: "openai",
    pkg: "openai6",
    caller: openaiCaller(OpenAI6),
    headersOnlyTimeout: true,
  },
  anthropic: {
    provider: "anthropic",
    pkg: "@anthropic-ai/sdk",
    caller: anthropicCaller,
    headersOnlyTimeout: true,
  },
  google: { provider: "google", pkg: "@google/genai", caller: googleCaller(GoogleGenAI) },
  google2: { provider: "google", pkg: "@google/genai2", caller: googleCaller(GoogleGenAI2) },
} as const satisfies Record<
  string,
  {
    provider: Provider;
    pkg: string;
    caller: (options: ClientOptions) => Send;
    /**
     * The SDK's `timeout` ends when the response headers arrive: a body that stalls after them
     * is waited for forever, so the `stall` fault is not run for it (only a timeout of the
     * caller's, such as the tool's `timeoutMs`, ends that wait).
     */
    headersOnlyTimeout?: true;
  }
>;
type Sdk = keyof typeof SDKS;
const SDK_NAMES = Object.keys(SDKS) as Sdk[];

export const CLIENTS = [...SDK_NAMES, "fetch", "axios"] as const;
export type Client = Sdk | "fetch" | "axios";

/** Whether a client's own timeout also bounds reading the body (fetch and axios: yes). */
function boundsBody(client: Client): boolean {
  return client === "fetch" || client === "axios" || !("headersOnlyTimeout" in SDKS[client]);
}

/** Installed version of a client (read from its package.json; the runtime for fetch). */
export function clientVersion(client: Client): string {
  if (client === "fetch") return `Node ${process.versions.node} (undici)`;
  const pkg = client === "axios" ? "axios" : SDKS[client].pkg;
  const url = new URL(`../../node_modules/${pkg}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, "utf8")) as { version: string }).version;
}

export interface Expected {
  pattern: Pattern;
  rule: string;
  evidence: Evidence;
  /** The wait the diagnosis must carry (undefined: none). */
  retryAfterMs?: number | undefined;
}

interface HttpAnswer {
  status: number;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string as is (with `contentType`). */
  body: unknown;
  contentType?: string;
}

/**
 * Connection faults: refused, reset, DNS failure, hung before the headers, dropped mid-body, and
 * `stall`: the headers and part of the body, then nothing.
 */
export type Fault = "refused" | "reset" | "dns" | "hang" | "midbody" | "stall";

export interface CorpusCase {
  /** Unique; the requests carry ROUTES' key for it, not this name, as the first path segment. */
  id: string;
  client: Client;
  answer?: HttpAnswer;
  fault?: Fault;
  expect: Expected;
}

// ---- what providers answer (from their error documentation) ------------------------------

const openaiError = (status: number, type: string, code: string | null, message: string) => ({
  status,
  body: { error: { message, type, param: null, code } },
});
const anthropicError = (status: number, type: string, message: string) => ({
  status,
  headers: { "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy" },
  body: { type: "error", error: { type, message }, request_id: "req_011CSHoEeqs5C35K2UUqR7Fy" },
});
const googleError = (status: number, code: string, message: string, details?: unknown[]) => ({
  status,
  body: { error: { code: status, message, status: code, ...(details ? { details } : {}) } },
});

const structured = (pattern: Pattern, rule: string, retryAfterMs?: number): Expected => ({
  pattern,
  rule,
  evidence: "structured",
  retryAfterMs,
});

const ANSWERS: {
  id: string;
  provider: Provider;
  answer: HttpAnswer;
  expect: Expected;
  /** Where a client cannot do as well (what it hands over lacks the evidence). */
  expectBy?: Partial<Record<Client, Expected>>;
}[] = [
  {
    id: "openai-429-rate-limit",
    provider: "openai",
    answer: {
      ...openaiError(
        429,
        "tokens",
        "rate_limit_exceeded",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits to learn more.",
      ),
      headers: {
        "retry-after": "2",
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "2.4s",
      },
    },
    expect: structured("RATE_LIMIT", "http-429", 2_000),
  },
  {
    // No Retry-After: the reset of the limit that ran out (requests) is the wait.
    id: "openai-429-reset-headers",
    provider: "openai",
    answer: {
      ...openaiError(
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1.",
      ),
      headers: {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1.5s",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "28000",
        "x-ratelimit-reset-tokens": "6m0s",
      },
    },
    expect: structured("RATE_LIMIT", "http-429", 1_500),
  },
  {
    id: "openai-429-insufficient-quota",
    provider: "openai",
    answer: openaiError(
      429,
      "insufficient_quota",
      "insufficient_quota",
      "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
    ),
    expect: structured("AUTH", "quota-exhausted"),
  },
  {
    id: "openai-400-context-length",
    provider: "openai",
    answer: openaiError(
      400,
      "invalid_request_error",
      "context_length_exceeded",
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
    ),
    expect: structured("CONTEXT_LENGTH", "context-length"),
  },
  {
    id: "openai-400-content-policy",
    provider: "openai",
    answer: openaiError(
      400,
      "invalid_request_error",
      "content_policy_violation",
      "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.",
    ),
    expect: structured("CONTENT_POLICY", "content-policy"),
  },
  {
    id: "openai-400-invalid-prompt",
    provider: "openai",
    answer: openaiError(
      400,
      "invalid_request_error",
      "invalid_prompt",
      "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt.",
    ),
    expect: structured("CONTENT_POLICY", "content-policy"),
  },
  {
    id: "openai-401-invalid-api-key",
    provider: "openai",
    answer: openaiError(
      401,
      "invalid_request_error",
      "invalid_api_key",
      "Incorrect API key provided: sk-proj-****abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
    ),
    expect: structured("AUTH", "auth"),
  },
  {
    id: "openai-404-model-not-found",
    provider: "openai",
    answer: openaiError(
      404,
      "invalid_request_error",
      "model_not_found",
      "The model `gpt-9` does not exist or you do not have access to it.",
    ),
    expect: structured("BAD_REQUEST", "not-found"),
  },
  {
    // The edge proxy answers an oversized request itself, with HTML.
    id: "openai-413-request-too-large",
    provider: "openai",
    answer: {
      status: 413,
      contentType: "text/html",
      body: "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n",
    },
    expect: structured("CONTEXT_LENGTH", "request-too-large"),
  },
  {
    id: "openai-500",
    provider: "openai",
    answer: openaiError(
      500,
      "server_error",
      null,
      "The server had an error while processing your request. Sorry about that!",
    ),
    expect: structured("SERVICE_DOWN", "http-500"),
  },
  {
    id: "openai-503",
    provider: "openai",
    answer: openaiError(
      503,
      "server_error",
      null,
      "The engine is currently overloaded, please try again later.",
    ),
    expect: structured("SERVICE_DOWN", "http-5xx-unavailable"),
  },
  {
    // An OpenAI-compatible server (FastChat, older vLLM, TensorRT-LLM, SGLang) answers with the
    // error object itself, not under `error`. openai 7 keeps it as the error's `error` and its
    // message; openai 6 drops it ("400 status code (no body)"): only the status is left.
    id: "openai-compatible-400-bare-body",
    provider: "openai",
    answer: {
      status: 400,
      body: {
        object: "error",
        message:
          "This model's maximum context length is 8192 tokens. However, you requested 9210 tokens (8186 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
        type: "BadRequestError",
        param: null,
        code: 400,
      },
    },
    expect: { pattern: "CONTEXT_LENGTH", rule: "context-length", evidence: "wording" },
    expectBy: { openai6: structured("BAD_REQUEST", "http-400") },
  },
  {
    id: "anthropic-429-rate-limit",
    provider: "anthropic",
    answer: {
      ...anthropicError(
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50,000 input tokens per minute.",
      ),
      headers: {
        "retry-after": "3",
        "anthropic-ratelimit-input-tokens-limit": "50000",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:03Z",
      },
    },
    expect: structured("RATE_LIMIT", "http-429", 3_000),
  },
  {
    id: "anthropic-529-overloaded",
    provider: "anthropic",
    answer: anthropicError(529, "overloaded_error", "Overloaded"),
    expect: structured("SERVICE_DOWN", "http-5xx-unavailable"),
  },
  {
    // Billing: a plain 400 invalid_request_error; the wording tells it from a bad request.
    id: "anthropic-400-credit-balance",
    provider: "anthropic",
    answer: anthropicError(
      400,
      "invalid_request_error",
      "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
    ),
    expect: structured("AUTH", "quota-exhausted"),
  },
  {
    // The structured form: a spend limit reached, with its error_code.
    id: "anthropic-429-spend-limit",
    provider: "anthropic",
    answer: {
      status: 429,
      body: {
        type: "error",
        error: {
          type: "rate_limit_error",
          message: "You have reached your specified API usage limits.",
          details: { error_code: "enforced_spend_limit_reached" },
        },
      },
    },
    expect: structured("AUTH", "quota-exhausted"),
  },
  {
    id: "anthropic-401-authentication",
    provider: "anthropic",
    answer: anthropicError(401, "authentication_error", "invalid x-api-key"),
    expect: structured("AUTH", "auth"),
  },
  {
    id: "anthropic-413-request-too-large",
    provider: "anthropic",
    answer: anthropicError(
      413,
      "request_too_large",
      "Request exceeds the maximum allowed number of bytes.",
    ),
    expect: structured("CONTEXT_LENGTH", "request-too-large"),
  },
  {
    // Only the wording tells: the diagnosis says so (evidence "wording").
    id: "anthropic-400-prompt-too-long",
    provider: "anthropic",
    answer: anthropicError(
      400,
      "invalid_request_error",
      "prompt is too long: 201234 tokens > 200000 maximum",
    ),
    expect: { pattern: "CONTEXT_LENGTH", rule: "context-length", evidence: "wording" },
  },
  {
    // Per-minute quota: the same wording as a spent quota, and retryable (RetryInfo says when).
    id: "google-429-resource-exhausted",
    provider: "google",
    answer: googleError(
      429,
      "RESOURCE_EXHAUSTED",
      "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
      [
        {
          "@type": "type.googleapis.com/google.rpc.QuotaFailure",
          violations: [
            {
              quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
              quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
              quotaDimensions: { location: "global", model: "gemini-2.0-flash" },
              quotaValue: "15",
            },
          ],
        },
        {
          "@type": "type.googleapis.com/google.rpc.Help",
          links: [
            {
              description: "Learn more about Gemini API quotas",
              url: "https://ai.google.dev/gemini-api/docs/rate-limits",
            },
          ],
        },
        { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" },
      ],
    ),
    expect: structured("RATE_LIMIT", "http-429", 7_000),
  },
  {
    id: "google-400-api-key-invalid",
    provider: "google",
    answer: googleError(
      400,
      "INVALID_ARGUMENT",
      "API key not valid. Please pass a valid API key.",
      [
        {
          "@type": "type.googleapis.com/google.rpc.ErrorInfo",
          reason: "API_KEY_INVALID",
          domain: "googleapis.com",
          metadata: { service: "generativelanguage.googleapis.com" },
        },
        {
          "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
          locale: "en-US",
          message: "API key not valid. Please pass a valid API key.",
        },
      ],
    ),
    expect: structured("AUTH", "auth"),
  },
  {
    id: "google-503-unavailable",
    provider: "google",
    answer: googleError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    expect: structured("SERVICE_DOWN", "http-5xx-unavailable"),
  },
  {
    id: "google-404-not-found",
    provider: "google",
    answer: googleError(
      404,
      "NOT_FOUND",
      "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.",
    ),
    expect: structured("BAD_REQUEST", "not-found"),
  },
];

const FAULTS: Record<Fault, { expect: Expected; expectBy?: Partial<Record<Client, Expected>> }> = {
  refused: { expect: structured("SERVICE_DOWN", "connection-failed") },
  reset: { expect: structured("SERVICE_DOWN", "connection-failed") },
  dns: { expect: structured("SERVICE_DOWN", "connection-failed") },
  hang: { expect: structured("TIMEOUT", "timeout") },
  midbody: { expect: structured("SERVICE_DOWN", "connection-failed") },
  stall: {
    expect: structured("TIMEOUT", "timeout"),
    // axios' timeout destroys the response, which it then reports as cut off: the same error
    // as `midbody` ("stream has been aborted", ERR_BAD_RESPONSE, status 200), nothing says
    // a timeout.
    expectBy: { axios: structured("SERVICE_DOWN", "connection-failed") },
  },
};

/**
 * Every case: each provider's answers through each of its SDKs, fetch and axios; each fault per
 * client.
 */
export const CORPUS: readonly CorpusCase[] = [
  ...ANSWERS.flatMap(({ id, provider, answer, expect, expectBy }) =>
    [
      ...SDK_NAMES.filter((sdk) => SDKS[sdk].provider === provider),
      "fetch" as const,
      "axios" as const,
    ].map((client) => ({
      id: `${client}--${id}`,
      client,
      answer,
      expect: expectBy?.[client] ?? expect,
    })),
  ),
  ...CLIENTS.flatMap((client) =>
    (Object.keys(FAULTS) as Fault[])
      .filter((fault) => fault !== "stall" || boundsBody(client))
      .map((fault) => ({
        id: `${client}--${fault}`,
        client,
        fault,
        expect: FAULTS[fault].expectBy?.[client] ?? FAULTS[fault].expect,
      })),
  ),
];

/** A name that never resolves (RFC 6761). */
const DNS_HOST = "selfheal-corpus.invalid";

// ---- the server ----------------------------------------------------------------------------

/**
 * The first path segment of a case's requests: a bare number, since some clients put the
 * request's path in their error messages (@anthropic-ai/sdk 1.17: "(…, path: /c12/v1/messages,
 * …)"), and a case's name there would be wording the diagnosis could match.
 */
const ROUTES = new Map(CORPUS.map((c, i) => [c.id, `c${i}`]));
const BY_ROUTE = new Map(CORPUS.map((c) => [ROUTES.get(c.id), c]));
const OK_BODY = JSON.stringify({ id: "ok", object: "chat.completion", choices: [] });

function answer(c: CorpusCase | undefined, req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (c?.fault === "hang") return;
  if (c?.fault === "reset") {
    req.socket.destroy();
    return;
  }
  if (c?.fault === "stall") {
    res.writeHead(200, { "content-type": "application/json", "content-length": "4096" });
    res.write(OK_BODY.slice(0, 20));
    return;
  }
  if (c?.fault === "midbody") {
    res.writeHead(200, { "content-type": "application/json", "content-length": "4096" });
    res.write(OK_BODY.slice(0, 20));
    setTimeout(() => res.socket?.destroy(), 5);
    return;
  }
  const a = c?.answer;
  if (!a) {
    res.writeHead(200, { "content-type": "application/json" }).end(OK_BODY);
    return;
  }
  const text = typeof a.body === "string" ? a.body : JSON.stringify(a.body);
  res.writeHead(a.status, {
    "content-type": a.contentType ?? "application/json",
    ...a.headers,
  });
  res.end(text);
}

export interface CorpusServer {
  url: string;
  /** A port nothing listens on. */
  closedPort: number;
  /** Requests per case id. */
  hits(id: string): number;
  close(): Promise<void>;
}

/** Starts the provider stand-in on 127.0.0.1 (a free port); close() drops hung sockets. */
export async function startCorpusServer(): Promise<CorpusServer> {
  const sockets = new Set<Socket>();
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const c = BY_ROUTE.get((req.url ?? "").split("/")[1]);
    if (c) hits.set(c.id, (hits.get(c.id) ?? 0) + 1);
    answer(c, req, res);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  // A port that was free a moment ago and is closed now: connecting to it is refused.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const closedPort = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => {
    probe.close(() => {
      resolve();
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    closedPort,
    hits: (id) => hits.get(id) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** Whether a `.invalid` name fails to resolve quickly here (else the DNS cases are skipped). */
export async function dnsFailsFast(host = DNS_HOST, withinMs = 1_000): Promise<boolean> {
  const failed = lookup(host).then(
    () => false,
    () => true,
  );
  const late = new Promise<boolean>((resolve) =>
    setTimeout(() => {
      resolve(false);
    }, withinMs).unref(),
  );
  return Promise.race([failed, late]);
}

// ---- the clients ---------------------------------------------------------------------------

/** Client timeout for a hung or stalled server, ms; generous for everything else. */
const HANG_TIMEOUT_MS = 150;
const TIMEOUT_MS = 10_000;

/** Where a case's client sends its requests. */
export function baseUrlOf(c: CorpusCase, server: CorpusServer): string {
  const route = ROUTES.get(c.id) ?? "";
  if (c.fault === "refused") return `http://127.0.0.1:${server.closedPort}/${route}`;
  if (c.fault === "dns") return `http://${DNS_HOST}/${route}`;
  return `${server.url}/${route}`;
}

/**
 * One request of a case through its client, as a user's tool makes it; it throws the client's
 * own error. SDK retries are off.
 */
export function callerOf(c: CorpusCase, server: CorpusServer): Send {
  const baseURL = baseUrlOf(c, server);
  const timeout = c.fault === "hang" || c.fault === "stall" ? HANG_TIMEOUT_MS : TIMEOUT_MS;
  const apiKey = "sk-corpus-0000000000000000";
  const body = { model: "gpt-4o", messages: [{ role: "user", content: PROMPT }] };
  switch (c.client) {
    case "fetch":
      return async (signal) => {
        const timer = AbortSignal.timeout(timeout);
        const res = await fetch(`${baseURL}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
          body: JSON.stringify(body),
          signal: signal ? AbortSignal.any([signal, timer]) : timer,
        });
        if (!res.ok) throw await HttpResponseError.from(res);
        return await res.json();
      };
    case "axios":
      return async (signal) =>
        (
          await axios.post<unknown>(`${baseURL}/v1/chat/completions`, body, {
            timeout,
            headers: { authorization: `Bearer ${apiKey}` },
            ...(signal ? { signal } : {}),
          })
        ).data;
    default:
      return SDKS[c.client].caller({ apiKey, baseURL, timeout });
  }
}

/** Runs one case's request and returns what the client threw (fails if nothing was thrown). */
export async function thrownBy(c: CorpusCase, server: CorpusServer): Promise<unknown> {
  try {
    await callerOf(c, server)();
  } catch (e) {
    return e;
  }
  throw new Error(`${c.id}: the client did not throw`);
}

// ---- time ----------------------------------------------------------------------------------

/**
 * Wall-clock time whose sleeps are skipped: a wait returns on the next turn and moves `now()`
 * forward by its length, and is recorded. Real requests, no real waiting for retries.
 */
export class SkipClock implements Clock {
  private skipped = 0;
  readonly waits: number[] = [];

  now(): number {
    return performance.timeOrigin + performance.now() + this.skipped;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    this.waits.push(ms);
    this.skipped += Math.max(0, ms);
    return new Promise((resolve) => setImmediate(resolve));
  }

  setTimer(ms: number, callback: () => void, options?: { unref?: boolean }): () => void {
    const timer = setTimeout(callback, ms);
    if (options?.unref) timer.unref();
    return () => {
      clearTimeout(timer);
    };
  }
}
