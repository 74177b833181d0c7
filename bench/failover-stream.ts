/**
 * Streaming failover in real time: the streaming scenarios of the public failoverbench catalogue
 * (S07-S11, S14), restated against fake provider servers on 127.0.0.1 that stream Server-Sent
 * Events (selfheal/testing's `startFakeProvider`, one server per route, speaking OpenAI Chat
 * Completions and Anthropic Messages), played by six clients one after another in one process,
 * each scenario on fresh servers and a fresh client:
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
 *   healOpenAI     the `openai` SDK healed in one line (selfheal/openai): `new OpenAI({ baseURL })`
 *              per route, `chat.completions.create({ stream: true })` read with `for await`, the
 *              same limits, `afterFirstToken: "restart"` and the text dropped in `onRestart`.
 *   healAnthropic  the same with `@anthropic-ai/sdk` (selfheal/anthropic):
 *              `messages.create({ stream: true })`, text from `content_block_delta` events.
 *   reference/anthropic  the reference on the Messages API (the healed Anthropic client's
 *              yardstick): complete only with `message_delta`'s `stop_reason`.
 *
 * The stream faults are the same events on both wires (docs/testing.md, "Streams"): a late first
 * token, a cut socket, a silence, an event cut mid-JSON among the text deltas, and no final event
 * (`[DONE]`, `message_stop`) after the finish. Both SDKs throw on the malformed event, as they do
 * against the real APIs, so their healed clients restart that answer on the fallback.
 *
 * Every answer is 60 tokens, one every 25 ms. A request passes when the text the consumer holds
 * at the end is the whole answer, exactly; the caller gives up at 45 s. Requests per route are
 * counted at the servers; times by the wall clock.
 *
 * Run: npm run bench:failover-stream   (writes bench/results/failover-stream.json; ~4 min)
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Anthropic from "@anthropic-ai/sdk";
import { streamText } from "ai";
import OpenAI from "openai";
import { createSelfHealing } from "../dist/index.js";
import { healModel, isRestartPart } from "../dist/adapters/ai-sdk.js";
import { healAnthropic } from "../dist/clients/anthropic.js";
import { healOpenAI } from "../dist/clients/openai.js";
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
/** Goal of the clients healed in one line (issue 43): at most this many times the reference's. */
const CLIENT_GOAL_RATIO = 1.1;
const MAX_TOKENS = 1024;

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
// The provider SDKs healed in one line, with the selfheal client's limits and mode. A restart
// reaches the caller through `onRestart` (the loop reads the SDK's own event types only), so each
// client keeps the text of its one request where `onRestart` can drop it.

function benchInstance() {
  return createSelfHealing({
    agent: "failover-stream-bench",
    recovery: { providers: ROUTES.map((name) => ({ name })) },
  });
}

const LIMITS = {
  provider: "primary",
  firstTokenMs: FIRST_TOKEN_MS,
  idleMs: IDLE_MS,
  afterFirstToken: "restart",
} as const;

function healOpenAIClient(servers: Servers): Client {
  const sh = benchInstance();
  const sdk = (route: Route) => new OpenAI({ baseURL: servers[route].url, apiKey: "sk-fake" });
  let text = "";
  const openai = healOpenAI(sh, sdk("primary"), {
    ...LIMITS,
    fallback: { provider: "fallback", client: sdk("fallback"), model: "fallback-model" },
    onRestart: () => {
      text = "";
    },
  });
  return {
    async answer(prompt, signal) {
      text = "";
      const stream = await openai.chat.completions.create(
        { model: "primary-model", stream: true, messages: [{ role: "user", content: prompt }] },
        { signal },
      );
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      return text;
    },
    close: () => sh.close(),
  };
}

function healAnthropicClient(servers: Servers): Client {
  const sh = benchInstance();
  const sdk = (route: Route) =>
    new Anthropic({ baseURL: servers[route].origin, apiKey: "sk-fake" });
  let text = "";
  const anthropic = healAnthropic(sh, sdk("primary"), {
    ...LIMITS,
    fallback: { provider: "fallback", client: sdk("fallback"), model: "fallback-model" },
    onRestart: () => {
      text = "";
    },
  });
  return {
    async answer(prompt, signal) {
      text = "";
      const stream = await anthropic.messages.create(
        {
          model: "primary-model",
          max_tokens: MAX_TOKENS,
          stream: true,
          messages: [{ role: "user", content: prompt }],
        },
        { signal },
      );
      for await (const event of stream) {
        if (event.type === "content_block_delta" && event.delta.type === "text_delta")
          text += event.delta.text;
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

/** A streaming API as the reference speaks it: where it posts, what, and how it reads an event. */
interface Wire {
  path: string;
  headers: Record<string, string>;
  body(model: string, prompt: string): unknown;
  /** The text an event's data adds, and whether it carries the finish. */
  read(data: unknown): { text: string; finish: boolean };
}

interface ChatChunk {
  choices?: { delta?: { content?: string }; finish_reason?: string | null }[];
}
interface AnthropicEvent {
  type?: string;
  delta?: { type?: string; text?: string; stop_reason?: string | null };
}

const WIRES = {
  chat: {
    path: "/chat/completions",
    headers: { authorization: "Bearer sk-fake" },
    body: (model, prompt) => ({
      model,
      stream: true,
      messages: [{ role: "user", content: prompt }],
    }),
    read(data) {
      const choice = (data as ChatChunk).choices?.[0];
      return { text: choice?.delta?.content ?? "", finish: !!choice?.finish_reason };
    },
  },
  anthropic: {
    path: "/messages",
    headers: { "x-api-key": "sk-fake", "anthropic-version": "2023-06-01" },
    body: (model, prompt) => ({
      model,
      max_tokens: MAX_TOKENS,
      stream: true,
      messages: [{ role: "user", content: prompt }],
    }),
    read(data) {
      const event = data as AnthropicEvent;
      const text =
        event.type === "content_block_delta" && event.delta?.type === "text_delta"
          ? (event.delta.text ?? "")
          : "";
      return { text, finish: event.type === "message_delta" && !!event.delta?.stop_reason };
    },
  },
} satisfies Record<string, Wire>;

/** One streamed attempt on one route: the whole answer, or a StreamFailure / network error. */
async function streamOnce(
  wire: Wire,
  url: string,
  model: string,
  prompt: string,
  caller: AbortSignal,
) {
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
    const res = await fetch(`${url}${wire.path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...wire.headers },
      body: JSON.stringify(wire.body(model, prompt)),
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
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          continue; // a malformed event: skipped
        }
        const { text: delta, finish } = wire.read(parsed);
        if (delta !== "") {
          text += delta;
          arm(IDLE_MS, "stalled");
        }
        if (finish) finished = true;
      }
    }
    if (!finished) throw new StreamFailure("cut: no finish");
    return text;
  } catch (error) {
    throw controller.signal.aborted ? (controller.signal.reason ?? error) : error;
  } finally {
    clearTimeout(timer);
    caller.removeEventListener("abort", onCaller);
  }
}

function referenceClient(wire: Wire, servers: Servers): Client {
  return {
    async answer(prompt, signal) {
      let last: unknown;
      for (const route of ROUTES) {
        if (signal.aborted) break;
        try {
          return await streamOnce(wire, servers[route].url, `${route}-model`, prompt, signal);
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

const CLIENTS = {
  reference: (servers: Servers) => referenceClient(WIRES.chat, servers),
  selfheal: selfhealClient,
  "plain AI SDK": plainClient,
  healOpenAI: healOpenAIClient,
  healAnthropic: healAnthropicClient,
  "reference/anthropic": (servers: Servers) => referenceClient(WIRES.anthropic, servers),
} satisfies Record<string, (servers: Servers) => Client>;
type ClientName = keyof typeof CLIENTS;

const rows: Row[] = [];
for (const scenario of SCENARIOS) {
  for (const [name, make] of Object.entries(CLIENTS)) rows.push(await play(scenario, name, make));
}
const total = (client: ClientName) =>
  rows.filter((r) => r.client === client).reduce((sum, r) => sum + r.seconds, 0);
const passes = (client: ClientName) => rows.filter((r) => r.client === client && r.pass).length;
const seconds = (client: ClientName) => Math.round(total(client) * 10) / 10;
const ratioTo = (client: ClientName, yardstick: ClientName) =>
  Math.round((total(client) / total(yardstick)) * 100) / 100;
const ratio = ratioTo("selfheal", "reference");
const healed = {
  healOpenAI: ratioTo("healOpenAI", "reference"),
  healAnthropic: ratioTo("healAnthropic", "reference/anthropic"),
};
report("failover-stream", rows as unknown as Record<string, unknown>[], {
  selfhealPasses: `${passes("selfheal")}/${SCENARIOS.length}`,
  referencePasses: `${passes("reference")}/${SCENARIOS.length}`,
  plainAiSdkPasses: `${passes("plain AI SDK")}/${SCENARIOS.length}`,
  selfhealSeconds: seconds("selfheal"),
  referenceSeconds: seconds("reference"),
  plainAiSdkSeconds: seconds("plain AI SDK"),
  ratio,
  goal: `all ${SCENARIOS.length} pass, ratio <= ${GOAL_RATIO}`,
  met: passes("selfheal") === SCENARIOS.length && ratio <= GOAL_RATIO,
  healOpenAIPasses: `${passes("healOpenAI")}/${SCENARIOS.length}`,
  healAnthropicPasses: `${passes("healAnthropic")}/${SCENARIOS.length}`,
  referenceAnthropicPasses: `${passes("reference/anthropic")}/${SCENARIOS.length}`,
  healOpenAISeconds: seconds("healOpenAI"),
  healAnthropicSeconds: seconds("healAnthropic"),
  referenceAnthropicSeconds: seconds("reference/anthropic"),
  "healOpenAI / reference": healed.healOpenAI,
  "healAnthropic / reference/anthropic": healed.healAnthropic,
  "healAnthropic / reference": ratioTo("healAnthropic", "reference"),
  clientsGoal: `the healed clients pass what selfheal (AI SDK) passes, each within ${CLIENT_GOAL_RATIO}x its reference`,
  clientsMet: (["healOpenAI", "healAnthropic"] as const).every(
    (client) => passes(client) === passes("selfheal") && healed[client] <= CLIENT_GOAL_RATIO,
  ),
});
