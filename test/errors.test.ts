import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CircuitOpenError,
  EmptyResponseError,
  FleetUnavailableError,
  HealthCheckFailedError,
  HttpResponseError,
  HumanEscalationRequiredError,
  InFlightElsewhereError,
  isCircuitOpenError,
  isEmptyResponseError,
  isFleetUnavailableError,
  isHealthCheckFailedError,
  isHttpResponseError,
  isHumanEscalationRequiredError,
  isInFlightElsewhereError,
  isReadOnlyModeError,
  isRecoveryBudgetExhaustedError,
  isSelfHealClosedError,
  isSelfHealConfigError,
  isSelfHealError,
  isStreamFirstTokenTimeoutError,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  isToolTimeoutError,
  ReadOnlyModeError,
  RecoveryBudgetExhaustedError,
  SelfHealClosedError,
  SelfHealConfigError,
  SelfHealError,
  StreamFirstTokenTimeoutError,
  StreamInterruptedError,
  StreamStalledError,
  StreamTruncatedError,
  ToolTimeoutError,
} from "../src/errors.js";
import { startServer } from "./helpers/http-server.js";

const MARKER = Symbol.for("selfheal:error");
const cause = new Error("HTTP 503");
const progress = (chunks: number) => ({ chunks, firstTokenMs: chunks > 0 ? 120 : undefined });

interface Kind {
  /** Builds the error around a name from the configuration (a tool, a dependency, a field). */
  make: (name: string) => SelfHealError;
  name: string;
  code: string;
  guard: (e: unknown) => boolean;
  /** The exact message for that name as the message shows it. */
  message: (shownName: string) => string;
}

/** Every error class whose message carries a configured name (cut at 200, on one line). */
const KINDS: Kind[] = [
  {
    make: (n) => new SelfHealConfigError(n, "must be between 0 and 1"),
    name: "SelfHealConfigError",
    code: "SELFHEAL_CONFIG",
    guard: isSelfHealConfigError,
    message: (n) => `selfheal: invalid option \`${n}\`: must be between 0 and 1`,
  },
  {
    make: (n) => new HealthCheckFailedError(n, "critical"),
    name: "HealthCheckFailedError",
    code: "SELFHEAL_HEALTH_CHECK_FAILED",
    guard: isHealthCheckFailedError,
    message: (n) =>
      `selfheal: write tool "${n}" refused: the agent's health is critical; read-only mode until it recovers (nothing was sent, retrying later is safe)`,
  },
  {
    make: (n) => new ToolTimeoutError(n, 5_000),
    name: "ToolTimeoutError",
    code: "SELFHEAL_TOOL_TIMEOUT",
    guard: isToolTimeoutError,
    message: (n) => `selfheal: tool "${n}" timed out after 5000 ms`,
  },
  {
    make: (n) => new EmptyResponseError(n),
    name: "EmptyResponseError",
    code: "SELFHEAL_EMPTY_RESPONSE",
    guard: isEmptyResponseError,
    message: (n) => `selfheal: LLM tool "${n}" returned an empty response`,
  },
  {
    make: (n) => new CircuitOpenError(n, 1_500),
    name: "CircuitOpenError",
    code: "SELFHEAL_CIRCUIT_OPEN",
    guard: isCircuitOpenError,
    message: (n) => `selfheal: circuit for "${n}" is open; next probe in 2 s`,
  },
  {
    make: (n) => new InFlightElsewhereError(n),
    name: "InFlightElsewhereError",
    code: "SELFHEAL_IN_FLIGHT_ELSEWHERE",
    guard: isInFlightElsewhereError,
    message: (n) =>
      `selfheal: a write of "${n}" with this idempotency key is still in flight on another worker; nothing was sent`,
  },
  {
    make: (n) => new HumanEscalationRequiredError(n, "SERVICE_DOWN", true, { cause }),
    name: "HumanEscalationRequiredError",
    code: "SELFHEAL_ESCALATED",
    guard: isHumanEscalationRequiredError,
    message: (n) =>
      `selfheal: "${n}" failed with SERVICE_DOWN and could not be recovered; escalated to a human`,
  },
  {
    make: (n) => new RecoveryBudgetExhaustedError(n, 0.0123, 0.01, { cause }),
    name: "RecoveryBudgetExhaustedError",
    code: "SELFHEAL_BUDGET_EXHAUSTED",
    guard: isRecoveryBudgetExhaustedError,
    message: (n) =>
      `selfheal: recovery budget of $0.0100 for this task is spent ($0.0123); "${n}" not retried`,
  },
  {
    make: (n) => new ReadOnlyModeError(n),
    name: "ReadOnlyModeError",
    code: "SELFHEAL_READ_ONLY",
    guard: isReadOnlyModeError,
    message: (n) =>
      `selfheal: write tool "${n}" refused: recovery degraded the agent to read-only until health recovers (nothing was sent)`,
  },
  {
    make: (n) => new StreamFirstTokenTimeoutError(n, 3_000, progress(0)),
    name: "StreamFirstTokenTimeoutError",
    code: "SELFHEAL_STREAM_FIRST_TOKEN_TIMEOUT",
    guard: isStreamFirstTokenTimeoutError,
    message: (n) => `selfheal: stream "${n}" sent no token within 3000 ms`,
  },
  {
    make: (n) => new StreamStalledError(n, 2_000, progress(7)),
    name: "StreamStalledError",
    code: "SELFHEAL_STREAM_STALLED",
    guard: isStreamStalledError,
    message: (n) => `selfheal: stream "${n}" stalled: no chunk for 2000 ms after 7 chunks`,
  },
  {
    make: (n) => new StreamTruncatedError(n, "cut", progress(4)),
    name: "StreamTruncatedError",
    code: "SELFHEAL_STREAM_TRUNCATED",
    guard: isStreamTruncatedError,
    message: (n) => `selfheal: stream "${n}" ended without its terminal signal after 4 chunks`,
  },
  {
    make: (n) => new StreamTruncatedError(n, "cut", progress(4), { cause }),
    name: "StreamTruncatedError",
    code: "SELFHEAL_STREAM_TRUNCATED",
    guard: isStreamTruncatedError,
    message: (n) => `selfheal: stream "${n}" broke after 4 chunks: its source threw (see cause)`,
  },
  {
    make: (n) => new StreamInterruptedError(n, 12, { cause }),
    name: "StreamInterruptedError",
    code: "SELFHEAL_STREAM_INTERRUPTED",
    guard: isStreamInterruptedError,
    message: (n) =>
      `selfheal: stream "${n}" failed after 12 chunks reached the caller; the answer is incomplete`,
  },
  {
    make: (n) => new FleetUnavailableError(n, false, { cause }),
    name: "FleetUnavailableError",
    code: "SELFHEAL_FLEET_UNAVAILABLE",
    guard: isFleetUnavailableError,
    message: (n) =>
      `selfheal: write "${n}" not sent: the fleet's idempotency ledger could not be asked within the call's deadline; nothing was sent`,
  },
];

/** The classes whose message takes no configured name, with a fixed instance each. */
const OTHERS: Omit<Kind, "make" | "message">[] = [
  { name: "SelfHealClosedError", code: "SELFHEAL_CLOSED", guard: isSelfHealClosedError },
  { name: "HttpResponseError", code: "SELFHEAL_HTTP_RESPONSE", guard: isHttpResponseError },
];
const otherInstances: SelfHealError[] = [
  new SelfHealClosedError("call"),
  new HttpResponseError(500, new Headers(), "", "https://api.example.com/v1"),
];

const ALL = [
  ...KINDS.map((k) => ({ ...k, error: k.make("lookup") })),
  ...OTHERS.map((k, i) => ({ ...k, error: otherInstances[i] as SelfHealError })),
];

describe("error classes", () => {
  it.each(KINDS.map((k) => [k.name, k] as const))("%s: name, code, exact message", (_, kind) => {
    const error = kind.make("lookup");
    expect(error).toBeInstanceOf(Error);
    expect(error).toBeInstanceOf(SelfHealError);
    expect(error.name).toBe(kind.name);
    expect(error.code).toBe(kind.code);
    expect(error.message).toBe(kind.message("lookup"));
    expect(String(error)).toBe(`${kind.name}: ${kind.message("lookup")}`);
  });

  it.each(KINDS.map((k) => [k.name, k] as const))(
    "%s: a configured name is cut at 200 characters and kept on one line",
    (_, kind) => {
      const hostile = `${"t".repeat(198)}\r\n${"x".repeat(100)}`;
      // The first 200 characters (198 t, \r, \n), control characters made visible.
      expect(kind.make(hostile).message).toBe(kind.message(`${"t".repeat(198)}\\r\\n`));
      expect(kind.make("a\u001b[2Jb").message).toBe(kind.message("a\\x1b[2Jb"));
    },
  );

  it("SelfHealClosedError: name, code, message; what was called is redacted and cut", () => {
    const error = new SelfHealClosedError("call");
    expect(error.name).toBe("SelfHealClosedError");
    expect(error.code).toBe("SELFHEAL_CLOSED");
    expect(error.message).toBe("selfheal: call after close()");
    const long = new SelfHealClosedError("w".repeat(300));
    expect(long.message).toBe(`selfheal: ${"w".repeat(199)}… after close()`);
    expect(new SelfHealClosedError("a\nb").message).toBe("selfheal: a\\nb after close()");
  });

  it("SelfHealConfigError: the problem is shown redacted, cut at 512, on one line; field kept", () => {
    const error = new SelfHealConfigError("notify.slack.url", "bad\nvalue");
    expect(error.field).toBe("notify.slack.url");
    expect(error.message).toBe("selfheal: invalid option `notify.slack.url`: bad\\nvalue");
    const secret = new SelfHealConfigError(
      "apiKey",
      "sk-proj-abcdefghijklmnopqrstuvwxyz0123 is no key",
    );
    expect(secret.message).not.toContain("abcdefghijklmnop");
    expect(secret.message).toContain("[REDACTED_KEY] is no key");
    const long = new SelfHealConfigError("f", "p ".repeat(400));
    expect(long.message).toBe(`selfheal: invalid option \`f\`: ${"p ".repeat(400).slice(0, 511)}…`);
  });

  it("CircuitOpenError rounds the wait up to whole seconds", () => {
    expect(new CircuitOpenError("api", 1).message).toMatch(/next probe in 1 s$/);
    expect(new CircuitOpenError("api", 1_000).message).toMatch(/next probe in 1 s$/);
    expect(new CircuitOpenError("api", 1_001).message).toMatch(/next probe in 2 s$/);
    expect(new CircuitOpenError("api", 30_000).message).toMatch(/next probe in 30 s$/);
    expect(new CircuitOpenError("api", 30_000)).toMatchObject({
      dependency: "api",
      retryAfterMs: 30_000,
    });
  });

  it("StreamTruncatedError names a finish reason other than a cut, itself cut and on one line", () => {
    const error = new StreamTruncatedError("chat", "length", progress(9), { cause });
    expect(error.message).toBe(
      'selfheal: stream "chat" finished with reason "length" after 9 chunks',
    );
    expect(error).toMatchObject({ tool: "chat", type: "length", progress: progress(9), cause });
    expect(new StreamTruncatedError("chat", "cu\nt", progress(1)).message).toBe(
      'selfheal: stream "chat" finished with reason "cu\\nt" after 1 chunks',
    );
    expect(new StreamTruncatedError("chat", "r".repeat(250), progress(1)).message).toBe(
      `selfheal: stream "chat" finished with reason "${"r".repeat(200)}" after 1 chunks`,
    );
  });

  it("FleetUnavailableError says when another worker was sending the write", () => {
    const error = new FleetUnavailableError("charge", true, { cause });
    expect(error.message).toBe(
      `selfheal: write "charge" not sent: the fleet's idempotency ledger could not be asked within the call's deadline (another worker was sending it when last asked); nothing was sent`,
    );
    expect(error).toMatchObject({ tool: "charge", inFlightElsewhere: true, cause });
    expect(new FleetUnavailableError("charge", false).cause).toBeUndefined();
  });

  it("fields and causes are kept as given", () => {
    expect(new HealthCheckFailedError("send", "warning")).toMatchObject({
      tool: "send",
      status: "warning",
    });
    expect(new ToolTimeoutError("t", 250)).toMatchObject({ tool: "t", timeoutMs: 250 });
    expect(new RecoveryBudgetExhaustedError("t", 2, 1.5, { cause })).toMatchObject({
      tool: "t",
      spentUsd: 2,
      budgetUsd: 1.5,
      cause,
    });
    expect(new StreamStalledError("s", 900, progress(3))).toMatchObject({
      idleMs: 900,
      progress: { chunks: 3, firstTokenMs: 120 },
    });
    expect(new StreamFirstTokenTimeoutError("s", 800, progress(0))).toMatchObject({
      firstTokenMs: 800,
      progress: { chunks: 0, firstTokenMs: undefined },
    });
    expect(new StreamInterruptedError("s", 4, { cause })).toMatchObject({ delivered: 4, cause });
  });
});

describe("guards", () => {
  it("each guard accepts its own class and no other", () => {
    for (const { error, guard, name } of ALL) {
      expect(isSelfHealError(error), name).toBe(true);
      for (const other of ALL)
        expect(other.guard(error), `${other.name}(${name})`).toBe(other.guard === guard);
    }
  });

  it.each(ALL.map((k) => [k.name, k] as const))(
    "%s guard: false on non-objects, null, plain objects, a missing or untrue marker",
    (_, { guard, code }) => {
      const withCode = (marker: unknown) => ({ code, [MARKER]: marker });
      const fn = Object.assign(() => undefined, { code, [MARKER]: true });
      for (const value of [undefined, null, 0, 1, true, code, Symbol(code), fn])
        expect(guard(value), String(value)).toBe(false);
      expect(guard({})).toBe(false);
      expect(guard({ code })).toBe(false);
      expect(guard(Object.assign(new Error("x"), { code }))).toBe(false);
      expect(guard(withCode("true"))).toBe(false);
      expect(guard(withCode(1))).toBe(false);
      expect(guard({ code: `${code}_X`, [MARKER]: true })).toBe(false);
      expect(guard({ [MARKER]: true })).toBe(false);
      // What a second copy of the package throws: same marker and code, another class.
      expect(guard(withCode(true))).toBe(true);
      expect(guard(Object.assign(new Error("from another copy"), withCode(true)))).toBe(true);
    },
  );

  it("isSelfHealError: the marker, from any copy of the package, and nothing else", () => {
    expect(isSelfHealError({ [MARKER]: true })).toBe(true);
    expect(isSelfHealError(Object.assign(new Error("x"), { [MARKER]: true }))).toBe(true);
    const others = [undefined, null, 0, "SELFHEAL_CONFIG", {}, new Error("x")];
    for (const [i, value] of others.entries()) expect(isSelfHealError(value), `#${i}`).toBe(false);
    expect(isSelfHealError({ [MARKER]: "true" })).toBe(false);
    expect(isSelfHealError({ [Symbol("selfheal:error")]: true })).toBe(false);
    expect(isSelfHealError(Object.assign(() => undefined, { [MARKER]: true }))).toBe(false);
  });

  it("guards work across duplicate copies of the package (no instanceof)", () => {
    const foreign = Object.assign(new Error("from another copy"), {
      code: "SELFHEAL_TOOL_TIMEOUT",
      [MARKER]: true,
    });
    expect(isToolTimeoutError(foreign)).toBe(true);
    expect(foreign instanceof ToolTimeoutError).toBe(false);
  });
});

describe("HumanEscalationRequiredError says whether anyone was told", () => {
  it.each([
    [true, true, /could not be recovered; escalated to a human$/],
    [
      false,
      true,
      /it needs a human, but no alert went out for it \(one of its kind was sent within recovery\.throttleMs, or the notifiers failed: see the log\)$/,
    ],
    [
      false,
      false,
      /it needs a human, but no notifier is configured, so nobody was alerted \(set recovery\.notifiers: slackNotifier, webhookNotifier or pushoverNotifier from selfheal\/notify\)$/,
    ],
  ])("notified %s, a notifier configured %s", (notified, notifierConfigured, message) => {
    const error = new HumanEscalationRequiredError("lookup", "SERVICE_DOWN", notified, {
      cause,
      notifierConfigured,
    });
    expect(error.message).toMatch(message);
    expect(error.message).not.toMatch(notified ? /nobody|no alert/ : /escalated to a human/);
    expect(error).toMatchObject({ notified, notifierConfigured, cause, pattern: "SERVICE_DOWN" });
    expect(isHumanEscalationRequiredError(error)).toBe(true);
  });

  it("a notifier is taken as configured unless the error says otherwise (errors made before the field)", () => {
    const error = new HumanEscalationRequiredError("t", "AUTH", true, { cause });
    expect(error.notifierConfigured).toBe(true);
  });
});

const encoder = new TextEncoder();

/**
 * A body streamed chunk by chunk, one per read (nothing read ahead): counts the chunks read and
 * whether the rest was cancelled. `endless` keeps sending that chunk once `chunks` are sent.
 */
function streamedBody(
  chunks: (string | Uint8Array)[],
  options: { endless?: string; failWith?: Error } = {},
) {
  const state = { reads: 0, cancelled: false };
  const queue = [...chunks];
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const next = queue.shift() ?? options.endless;
        if (next === undefined) {
          if (options.failWith) controller.error(options.failWith);
          else controller.close();
          return;
        }
        state.reads++;
        controller.enqueue(typeof next === "string" ? encoder.encode(next) : next);
      },
      cancel() {
        state.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, state };
}

const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("HttpResponseError", () => {
  it("new: the message shows the status, then the body redacted, cut at 512, on one line", () => {
    expect(new HttpResponseError(503, new Headers(), "", "u").message).toBe("HTTP 503");
    expect(new HttpResponseError(500, new Headers(), "boom\nagain", "u").message).toBe(
      "HTTP 500: boom\\nagain",
    );
    const key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
    const withKey = new HttpResponseError(401, new Headers(), `Incorrect API key ${key}`, "u");
    expect(withKey.message).toBe("HTTP 401: Incorrect API key [REDACTED_KEY]");
    expect(withKey.body).toBe(`Incorrect API key ${key}`);
    const long = "e ".repeat(400);
    expect(new HttpResponseError(500, new Headers(), long, "u").message).toBe(
      `HTTP 500: ${long.slice(0, 511)}…`,
    );
    const exactly512 = "x ".repeat(256);
    expect(new HttpResponseError(500, new Headers(), exactly512, "u").message).toBe(
      `HTTP 500: ${exactly512}`,
    );
  });

  it("new: the body's `error` object is parsed (OpenAI-compatible), anything else is not", () => {
    const make = (body: string) => new HttpResponseError(400, new Headers(), body, "u").error;
    expect(make('{"error":{"message":"bad","type":"invalid_request_error","code":"x"}}')).toEqual({
      message: "bad",
      type: "invalid_request_error",
      code: "x",
    });
    expect(make('{"error":"bad key"}')).toBeUndefined();
    expect(make('{"error":null}')).toBeUndefined();
    expect(make('{"error":42}')).toBeUndefined();
    expect(make('{"message":"bad"}')).toBeUndefined();
    expect(make('{"error":{"message":"cut')).toBeUndefined();
    // Only a body that starts as an object is parsed (not JSON with space before it, not arrays).
    expect(make(' {"error":{"message":"bad"}}')).toBeUndefined();
    expect(make('[{"error":{"message":"bad"}}]')).toBeUndefined();
    expect(make("upstream exploded")).toBeUndefined();
    expect(make("")).toBeUndefined();
  });

  it("from(): a response without a body keeps status, headers and url", async () => {
    const response = new Response(null, { status: 503, headers: { "retry-after": "7" } });
    const error = await HttpResponseError.from(response);
    expect(error).toBeInstanceOf(HttpResponseError);
    expect(isHttpResponseError(error)).toBe(true);
    expect(error).toMatchObject({
      name: "HttpResponseError",
      code: "SELFHEAL_HTTP_RESPONSE",
      status: 503,
      body: "",
      url: "",
      error: undefined,
      message: "HTTP 503",
    });
    expect(error.headers.get("retry-after")).toBe("7");
  });

  it("from(): a JSON error body is read whole and its error object parsed into fields", async () => {
    const text = '{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}';
    const { stream, state } = streamedBody([text.slice(0, 20), text.slice(20)]);
    const error = await HttpResponseError.from(new Response(stream, { status: 429 }));
    expect(error.body).toBe(text);
    expect(error.error).toEqual({ message: "Rate limit reached", type: "rate_limit_error" });
    expect(error.message).toBe(`HTTP 429: ${text}`);
    expect(state.reads).toBe(2);
  });

  it("from(): a non-JSON body is kept as text, with no error object", async () => {
    const error = await HttpResponseError.from(
      new Response("<html>502 Bad Gateway</html>", { status: 502 }),
    );
    expect(error.body).toBe("<html>502 Bad Gateway</html>");
    expect(error.error).toBeUndefined();
    expect(error.message).toBe("HTTP 502: <html>502 Bad Gateway</html>");
  });

  it("from(): a character split across chunks is decoded whole", async () => {
    const bytes = encoder.encode("café ok");
    const at = bytes.indexOf(0xc3) + 1; // between the two bytes of "é"
    const { stream } = streamedBody([bytes.slice(0, at), bytes.slice(at)]);
    const error = await HttpResponseError.from(new Response(stream, { status: 500 }));
    expect(error.body).toBe("café ok");
  });

  it("from(): reads 8 KiB and no further; the rest is cancelled, never buffered", async () => {
    const { stream, state } = streamedBody(["a".repeat(4096), "b".repeat(4096)], {
      endless: "c".repeat(1024),
    });
    const error = await HttpResponseError.from(new Response(stream, { status: 500 }));
    expect(error.body).toBe("a".repeat(4096) + "b".repeat(4096));
    expect(state.reads).toBe(2);
    await endOfTurn();
    expect(state.cancelled).toBe(true);
  });

  it("from(): a body over 8 KiB is cut at 8 KiB", async () => {
    const { stream, state } = streamedBody(["a".repeat(5000), "b".repeat(5000), "c".repeat(10)]);
    const error = await HttpResponseError.from(new Response(stream, { status: 500 }));
    expect(error.body).toBe("a".repeat(5000) + "b".repeat(3192));
    expect(error.body).toHaveLength(8192);
    expect(state.reads).toBe(2);
    await endOfTurn();
    expect(state.cancelled).toBe(true);
  });

  it("from(): a body that fails part-way keeps what was read", async () => {
    const { stream } = streamedBody(["partial ", "answer"], {
      failWith: new Error("socket hang up"),
    });
    const error = await HttpResponseError.from(new Response(stream, { status: 500 }));
    expect(error.body).toBe("partial answer");
    expect(error.message).toBe("HTTP 500: partial answer");
  });

  describe("from() on a fetch response", () => {
    let server: Awaited<ReturnType<typeof startServer>>;
    beforeAll(async () => {
      server = await startServer((req, res) => {
        if (req.url === "/big") {
          res.writeHead(500, { "content-type": "text/plain" });
          res.end("z".repeat(100_000));
          return;
        }
        res.writeHead(429, { "content-type": "application/json", "retry-after": "12" });
        res.end('{"error":{"message":"Too many requests","code":"rate_limit_exceeded"}}');
      });
    });
    afterAll(() => server.close());

    it("keeps status, Retry-After, url and the parsed error", async () => {
      const response = await fetch(`${server.url}/v1/chat`);
      const error = await HttpResponseError.from(response);
      expect(error).toMatchObject({
        status: 429,
        url: `${server.url}/v1/chat`,
        error: { message: "Too many requests", code: "rate_limit_exceeded" },
        message: 'HTTP 429: {"error":{"message":"Too many requests","code":"rate_limit_exceeded"}}',
      });
      expect(error.headers.get("retry-after")).toBe("12");
    });

    it("keeps the first 8 KiB of a long body", async () => {
      const error = await HttpResponseError.from(await fetch(`${server.url}/big`));
      expect(error.body).toBe("z".repeat(8192));
      expect(error.status).toBe(500);
    });
  });
});
