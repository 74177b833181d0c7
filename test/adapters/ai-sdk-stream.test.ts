/**
 * AI SDK streams healed by `healModel`, end to end, on AI SDK 6 and 7 (7 on Node 22+):
 * `streamText` over the real OpenAI-compatible provider of each (`@ai-sdk/openai-compatible` 2,
 * v3 models; 3, v4 models) against fake OpenAI-compatible servers on 127.0.0.1 streaming
 * Server-Sent Events (selfheal/testing), each stream fault through each `afterFirstToken` mode.
 * selfheal runs on a VirtualClock: its limits pass only when a test advances it, while the
 * servers stream in real time; no assertion depends on how fast they do.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { healModel } from "../../src/adapters/ai-sdk.js";
import type { StreamPart } from "../fixtures/adapters/ai-sdk-models.js";
import { aiSdks, type AiSdk } from "../fixtures/adapters/ai-sdk-versions.js";
import {
  createSelfHealing,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type StreamMode,
  type ToolCallEvent,
} from "../../src/index.js";
import { startFakeProvider, VirtualClock, type FakeProvider } from "../../src/testing/index.js";
import { eventually } from "../helpers/otlp.js";

const WORDS = 12;
const ANSWER = Array.from({ length: WORDS }, (_, i) => `w${i + 1}`).join(" ");
const LIMIT_MS = 5_000;
/** Real time a server fault waits: longer than any test. */
const NEVER_MS = 600_000;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

async function routes(arm: (primary: FakeProvider) => void) {
  const primary = await startFakeProvider({ reply: ANSWER, tokenIntervalMs: 1 });
  const fallback = await startFakeProvider({
    reply: ANSWER,
    tokenIntervalMs: 1,
    rejectPrefill: true, // a prefill would fail: selfheal must ask for the whole answer again
  });
  open.push(primary, fallback);
  arm(primary);
  return { primary, fallback };
}

function healed(
  sdk: AiSdk,
  servers: { primary: FakeProvider; fallback: FakeProvider },
  mode: StreamMode,
  { eventLog, fallback = true }: { eventLog?: string; fallback?: boolean } = {},
) {
  const clock = new VirtualClock();
  const sh = createSelfHealing({
    agent: "stream-agent",
    clock,
    logger: { warn: () => undefined },
    recovery: {
      providers: [{ name: "primary" }, { name: "fallback" }],
      random: () => 0,
      ...(eventLog !== undefined && { eventLog: { path: eventLog } }),
    },
  });
  open.push(sh);
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const model = (route: "primary" | "fallback") =>
    sdk
      .createOpenAICompatible({
        name: route,
        baseURL: servers[route].url,
        apiKey: "sk-fake",
      })
      .chatModel(`${route}-model`);
  // Text parts the primary handed to selfheal: a test lets a limit pass only once they did.
  const received = { text: 0 };
  const counted = sdk.ai.wrapLanguageModel({
    model: model("primary"),
    middleware: {
      specificationVersion: "v3",
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        const count = new TransformStream<StreamPart, StreamPart>({
          transform(part, controller) {
            if (part.type === "text-delta") received.text++;
            controller.enqueue(part);
          },
        });
        return { ...result, stream: result.stream.pipeThrough(count) };
      },
    },
  });
  const restarts: number[] = [];
  const chat = healModel(sh, counted, {
    provider: "primary",
    ...(fallback && { fallback: { provider: "fallback", model: model("fallback") } }),
    firstTokenMs: LIMIT_MS,
    idleMs: LIMIT_MS,
    afterFirstToken: mode,
    onRestart: (r) => restarts.push(r.discard),
  });
  return { sh, clock, calls, chat, restarts, received };
}

/**
 * Reads the full stream as a UI would: text, restart markers (raw parts), error parts. On AI
 * SDK 7, as its own names have it (`stream`, `include: { rawChunks }`); `fullStream` and
 * `includeRawChunks` are AI SDK 6's.
 */
function consume(sdk: AiSdk, model: ReturnType<typeof healed>["chat"]) {
  const seen = {
    text: "",
    deltas: 0,
    restarts: 0,
    errors: [] as unknown[],
    thrown: undefined as unknown,
  };
  const raw = sdk.major === 7 ? { include: { rawChunks: true } } : { includeRawChunks: true };
  const result = sdk.ai.streamText({
    model,
    prompt: "say the words",
    maxRetries: 0,
    ...raw,
    onError: () => undefined,
  });
  // AI SDK 7 names the full stream `stream` (the suite types its result as AI SDK 6's).
  const parts =
    sdk.major === 7
      ? (result as unknown as { stream: typeof result.fullStream }).stream
      : result.fullStream;
  const done = (async () => {
    try {
      for await (const part of parts) {
        if (part.type === "text-delta") {
          seen.text += part.text;
          seen.deltas++;
        } else if (
          part.type === "raw" &&
          (part.rawValue as { type?: unknown } | null)?.type === "selfheal.restart"
        ) {
          seen.restarts++;
          seen.text = "";
        } else if (part.type === "error") seen.errors.push(part.error);
      }
    } catch (e) {
      seen.thrown = e;
    }
  })();
  return { seen, done };
}

const MODES: readonly StreamMode[] = ["fail", "restart", "buffer"];

for (const sdk of await aiSdks()) {
  describe(`${sdk.name}: AI SDK streams through healModel, over real SSE`, () => {
    for (const mode of MODES) {
      it(`${mode}: a slow first token fails over before anything reached the SDK`, async () => {
        const servers = await routes((p) =>
          p.injector.inject("slow_first_token", { first: 1 }, { delayMs: NEVER_MS }),
        );
        const { clock, calls, chat } = healed(sdk, servers, mode);
        const { seen, done } = consume(sdk, chat);
        await eventually(() => servers.primary.requests === 1, "the primary's request");
        await clock.advance(LIMIT_MS);
        await done;
        expect(seen).toMatchObject({ text: ANSWER, restarts: 0, errors: [] });
        expect(servers.fallback.requests).toBe(1);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      for (const fault of ["stream_cut", "stream_stall"] as const) {
        it(`${mode}: ${fault === "stream_cut" ? "a cut" : "a stall"} after 5 tokens`, async () => {
          const servers = await routes((p) =>
            p.injector.inject(fault, { first: 1 }, { afterTokens: 5, silentMs: NEVER_MS }),
          );
          const { clock, calls, chat, restarts, received } = healed(sdk, servers, mode);
          const { seen, done } = consume(sdk, chat);
          if (fault === "stream_stall") {
            // The five tokens are out and the server is silent: only then may the idle limit pass.
            await eventually(
              () => servers.primary.stalled === 1 && received.text === 5,
              "the primary's five tokens, then its stall",
            );
            await clock.advance(LIMIT_MS);
          }
          await done;
          const cause = fault === "stream_cut" ? isStreamTruncatedError : isStreamStalledError;
          if (mode === "fail") {
            // The five words reached the SDK; then fullStream throws a typed error. Never a success.
            expect(seen.text).toBe(ANSWER.split(" ").slice(0, 5).join(" "));
            const error = seen.thrown;
            expect(isStreamInterruptedError(error)).toBe(true);
            expect((error as { delivered: number }).delivered).toBeGreaterThan(0);
            expect(cause((error as Error).cause)).toBe(true);
            expect(servers.fallback.requests).toBe(0);
            expect(calls.map((c) => c.outcome)).toEqual(["error"]);
          } else {
            expect(seen.text).toBe(ANSWER);
            expect(seen.errors).toEqual([]);
            expect(seen.thrown).toBeUndefined();
            expect(seen.restarts).toBe(mode === "restart" ? 1 : 0);
            expect(restarts).toHaveLength(mode === "restart" ? 1 : 0);
            expect(servers.fallback.requests).toBe(1);
            expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
          }
        });
      }

      it(`${mode}: no [DONE] but a finish reason is a complete answer; one malformed event is the SDK's`, async () => {
        const servers = await routes((p) => {
          p.injector.inject("no_done", { first: 1 });
          p.injector.inject("malformed_event", { first: 1 }, { atToken: 3 });
        });
        const { calls, chat } = healed(sdk, servers, mode);
        for (let i = 0; i < 2; i++) {
          const { seen, done } = consume(sdk, chat);
          await done;
          expect(seen.text).toBe(ANSWER);
          expect(seen.restarts).toBe(0);
        }
        expect(servers.primary.requests).toBe(2);
        expect(servers.fallback.requests).toBe(0);
        expect(calls.map((c) => c.outcome)).toEqual(["success", "success"]);
      });
    }

    it("a cut stream is a failure in status(), the metrics' events and the JSONL event log", async () => {
      const log = join(mkdtempSync(join(tmpdir(), "selfheal-stream-")), "events.jsonl");
      const servers = await routes((p) =>
        p.injector.inject("stream_cut", { probability: 1 }, { afterTokens: 3 }),
      );
      // One route: with a fallback, the primary's breaker would soon send calls there instead.
      const { sh, clock, calls, chat } = healed(sdk, servers, "fail", {
        eventLog: log,
        fallback: false,
      });
      for (let i = 0; i < 10; i++) await consume(sdk, chat).done;
      expect(calls.map((c) => c.outcome)).toEqual(Array(10).fill("error"));
      await clock.advance(6_000); // past the health cache
      const status = await sh.status();
      expect(status.status).toBe("critical");
      await sh.close();
      const lines = readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { pattern?: string; outcome?: string });
      const recoveries = lines.filter((l) => l.pattern !== undefined);
      expect(recoveries).toHaveLength(10);
      expect(
        recoveries.every((l) => l.pattern === "STREAM_TRUNCATED" && l.outcome === "failed"),
      ).toBe(true);
    });
  });
}
