/**
 * Streaming failover in real time: the streaming scenarios of the public failoverbench catalogue
 * (S07-S11, S14), restated against fake OpenAI-compatible servers on 127.0.0.1 that stream
 * Server-Sent Events (selfheal/testing's `startFakeProvider`, one server per route), played by
 * two clients side by side in one process, each scenario on fresh servers and a fresh client:
 *
 *   selfheal   as the README's AI SDK section shows it: AI SDK 6 `streamText` over
 *              `@ai-sdk/openai-compatible`, the model healed by `healModel` with a fallback model
 *              as the second route, the README's limits for chat models (firstTokenMs 10 s,
 *              idleMs 10 s), `afterFirstToken: "restart"`; the consumer reads `fullStream` and
 *              drops its text at selfheal's restart part (`isRestartPart`).
 *   reference  a streaming client written below (~150 lines): fetch, its own SSE reader, a
 *              first-token and an idle timer of the same 10 s, a stream complete only with its
 *              finish_reason, a malformed event skipped, and on any failure the partial answer
 *              dropped and the whole request sent to the next route (never a prefill).
 *   plain      for comparison, the plain AI SDK: `streamText` on the primary alone, defaults.
 *
 * Every answer is 60 tokens, one every 25 ms. A request passes when the text the consumer holds
 * at the end is the whole answer, exactly; the caller gives up at 45 s. Requests per route are
 * counted at the servers; times by the wall clock.
 *
 * Run: npm run bench:failover-stream   (writes bench/results/failover-stream.json; ~2 min)
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText } from "ai";
import { createSelfHealing } from "../dist/index.js";
import { healModel, isRestartPart } from "../dist/adapters/ai-sdk.js";
import { startFakeProvider, type FakeProvider } from "../dist/testing/index.js";
import { report } from "./harness.js";

const TOKENS = 60;
const TOKEN_INTERVAL_MS = 25;
const ANSWER = Array.from({ length: TOKENS }, (_, i) => `w${i + 1}`).join(" ");
/** The limits both clients use (the README's for chat models). */
const FIRST_TOKEN_MS = 10_000;
const IDLE_MS = 10_000;
/** The caller's patience per request. */
const DEADLINE_MS = 45_000;
/** Goal: selfheal's total time at most this many times the reference's. */
const GOAL_RATIO = 1.2;

type Route = "primary" | "fallback";
const ROUTES: readonly Route[] = ["primary", "fallback"];
type Servers = Record<Route, FakeProvider>;

interface Scenario {
  id: string;
  name: string;
  /** Faults of the primary (every request); the fallback is healthy. */
  arm(servers: Servers): void;
  /** The fallback refuses a conversation that ends with an assistant message. */
  rejectPrefill?: boolean;
}

const SCENARIOS: readonly Scenario[] = [
  {
    id: "S07",
    name: "first token only after 20 s",
    arm: (s) =>
      s.primary.injector.inject("slow_first_token", { probability: 1 }, { delayMs: 20_000 }),
  },
  {
    id: "S08",
    name: "stream cut after 40 of 60 tokens",
    arm: (s) => s.primary.injector.inject("stream_cut", { probability: 1 }, { afterTokens: 40 }),
  },
  {
    id: "S09",
    name: "stream silent for 30 s mid-answer",
    arm: (s) =>
      s.primary.injector.inject(
        "stream_stall",
        { probability: 1 },
        { afterTokens: 20, silentMs: 30_000 },
      ),
  },
  {
    id: "S10",
    name: "one malformed SSE event",
    arm: (s) => s.primary.injector.inject("malformed_event", { probability: 1 }, { atToken: 10 }),
  },
  {
    id: "S11",
    name: "no [DONE]",
    arm: (s) => s.primary.injector.inject("no_done", { probability: 1 }),
  },
  {
    id: "S14",
    name: "cut, and the fallback rejects an assistant prefill",
    arm: (s) => s.primary.injector.inject("stream_cut", { probability: 1 }, { afterTokens: 40 }),
    rejectPrefill: true,
  },
];

interface Client {
  /** The text the consumer holds when the stream ends (throws when it gave up). */
  answer(prompt: string, signal: AbortSignal): Promise<string>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// selfheal, as the README's AI SDK section shows it.

function selfhealClient(servers: Servers): Client {
  const sh = createSelfHealing({
    agent: "failover-stream-bench",
    recovery: { providers: ROUTES.map((name) => ({ name })) },
  });
  const model = (route: Route) =>
    createOpenAICompatible({
      name: route,
      baseURL: servers[route].url,
      apiKey: "sk-fake",
    }).chatModel(`${route}-model`);
  const healed = healModel(sh, model("primary"), {
    provider: "primary",
    fallback: { provider: "fallback", model: model("fallback") },
    firstTokenMs: FIRST_TOKEN_MS,
    idleMs: IDLE_MS,
    afterFirstToken: "restart",
  });
  return {
    async answer(prompt, signal) {
      const result = streamText({
        model: healed,
        prompt,
        maxRetries: 0,
        abortSignal: signal,
        includeRawChunks: true,
        onError: () => undefined, // errors are read from the stream below
      });
      let text = "";
      for await (const part of result.fullStream) {
        if (part.type === "text-delta") text += part.text;
        else if (isRestartPart(part)) text = "";
        else if (part.type === "error" && signal.aborted) throw part.error;
      }
      return text;
    },
    close: () => sh.close(),
  };
}

// ---------------------------------------------------------------------------------------------
// The plain AI SDK, for comparison: the primary model alone, the SDK's defaults.

function plainClient(servers: Servers): Client {
  const model = createOpenAICompatible({
    name: "primary",
    baseURL: servers.primary.url,
    apiKey: "sk-fake",
  }).chatModel("primary-model");
  return {
    async answer(prompt, signal) {
      const result = streamText({ model, prompt, abortSignal: signal, onError: () => undefined });
      let text = "";
      for await (const part of result.fullStream) {
        if (part.type === "text-delta") text += part.text;
        else if (part.type === "error" && signal.aborted) throw part.error;
      }
      return text;
    },
    close: () => Promise.resolve(),
  };
}

// ---------------------------------------------------------------------------------------------
// The reference client: what a careful user writes by hand.

class StreamFailure extends Error {
  override readonly name = "StreamFailure";
}

/** One streamed attempt on one route: the whole answer, or a StreamFailure / network error. */
async function streamOnce(url: string, model: string, prompt: string, caller: AbortSignal) {
  const controller = new AbortController();
  const onCaller = () => {
    controller.abort(caller.reason);
  };
  caller.addEventListener("abort", onCaller, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const arm = (ms: number, why: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      controller.abort(new StreamFailure(why));
    }, ms);
  };
  arm(FIRST_TOKEN_MS, "no first token");
  try {
    const res = await fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer sk-fake" },
      body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: prompt }] }),
      signal: controller.signal,
    });
    if (!res.ok || !res.body) throw new StreamFailure(`HTTP ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let text = "";
    let finished = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trimStart())
          .join("\n");
        if (data === "" || data === "[DONE]") continue;
        let chunk: { choices?: { delta?: { content?: string }; finish_reason?: string | null }[] };
        try {
          chunk = JSON.parse(data) as typeof chunk;
        } catch {
          continue; // a malformed event: skipped
        }
        const choice = chunk.choices?.[0];
        const delta = choice?.delta?.content ?? "";
        if (delta !== "") {
          text += delta;
          arm(IDLE_MS, "stalled");
        }
        if (choice?.finish_reason) finished = true;
      }
    }
    if (!finished) throw new StreamFailure("cut: no finish_reason");
    return text;
  } catch (error) {
    throw controller.signal.aborted ? (controller.signal.reason ?? error) : error;
  } finally {
    clearTimeout(timer);
    caller.removeEventListener("abort", onCaller);
  }
}

function referenceClient(servers: Servers): Client {
  return {
    async answer(prompt, signal) {
      let last: unknown;
      for (const route of ROUTES) {
        if (signal.aborted) break;
        try {
          return await streamOnce(servers[route].url, `${route}-model`, prompt, signal);
        } catch (error) {
          last = error; // the partial answer is dropped; the whole request goes to the next route
        }
      }
      throw last;
    },
    close: () => Promise.resolve(),
  };
}

// ---------------------------------------------------------------------------------------------

interface Row {
  scenario: string;
  client: string;
  pass: boolean;
  seconds: number;
  primaryRequests: number;
  fallbackRequests: number;
  error?: string;
}

async function play(scenario: Scenario, name: string, make: (s: Servers) => Client): Promise<Row> {
  const servers: Servers = {
    primary: await startFakeProvider({ reply: ANSWER, tokenIntervalMs: TOKEN_INTERVAL_MS }),
    fallback: await startFakeProvider({
      reply: ANSWER,
      tokenIntervalMs: TOKEN_INTERVAL_MS,
      rejectPrefill: scenario.rejectPrefill === true,
    }),
  };
  scenario.arm(servers);
  const client = make(servers);
  const controller = new AbortController();
  const deadline = setTimeout(() => {
    controller.abort(new Error("deadline"));
  }, DEADLINE_MS);
  const started = performance.now();
  let text = "";
  let error: string | undefined;
  try {
    text = await client.answer("Say the sixty words.", controller.signal);
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  const seconds = (performance.now() - started) / 1000;
  clearTimeout(deadline);
  await client.close();
  const row: Row = {
    scenario: `${scenario.id} ${scenario.name}`,
    client: name,
    pass: error === undefined && text === ANSWER,
    seconds: Math.round(seconds * 100) / 100,
    primaryRequests: servers.primary.requests,
    fallbackRequests: servers.fallback.requests,
  };
  if (error !== undefined) row.error = error;
  else if (text !== ANSWER) row.error = `answer of ${text.split(" ").length} words, not the whole`;
  await Promise.all([servers.primary.close(), servers.fallback.close()]);
  return row;
}

const rows: Row[] = [];
for (const scenario of SCENARIOS) {
  rows.push(await play(scenario, "reference", referenceClient));
  rows.push(await play(scenario, "selfheal", selfhealClient));
  rows.push(await play(scenario, "plain AI SDK", plainClient));
}
const total = (client: string) =>
  rows.filter((r) => r.client === client).reduce((sum, r) => sum + r.seconds, 0);
const passes = (client: string) => rows.filter((r) => r.client === client && r.pass).length;
const ratio = total("selfheal") / total("reference");
report("failover-stream", rows as unknown as Record<string, unknown>[], {
  selfhealPasses: `${passes("selfheal")}/${SCENARIOS.length}`,
  referencePasses: `${passes("reference")}/${SCENARIOS.length}`,
  plainAiSdkPasses: `${passes("plain AI SDK")}/${SCENARIOS.length}`,
  selfhealSeconds: Math.round(total("selfheal") * 10) / 10,
  referenceSeconds: Math.round(total("reference") * 10) / 10,
  plainAiSdkSeconds: Math.round(total("plain AI SDK") * 10) / 10,
  ratio: Math.round(ratio * 100) / 100,
  goal: `all ${SCENARIOS.length} pass, ratio <= ${GOAL_RATIO}`,
  met: passes("selfheal") === SCENARIOS.length && ratio <= GOAL_RATIO,
});
