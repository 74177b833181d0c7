/**
 * What healing a provider client costs per call, side by side in one process: the same `openai`,
 * `@anthropic-ai/sdk` and `@google/genai` client called bare and healed in one line
 * (`healOpenAI`, `healAnthropic`, `healGoogleGenAI`, a fallback model declared as users write it):
 *
 *   openai chat.completions.create             plain, and `stream: true` read to its end
 *   anthropic messages.create                   plain, and `stream: true` read to its end
 *   gemini models.generateContent               plain, and generateContentStream read to its end
 *
 * 1. Over HTTP (the goal's figure): against a fake provider on 127.0.0.1 (selfheal/testing's
 *    `startFakeProvider`, `tokenIntervalMs: 0`) in a child process, so that this process does
 *    only the clients' work; the clients made as users make them (`new OpenAI({ baseURL,
 *    apiKey })`: the SDK's own fetch with its HTTP keep-alive). Bare; bare with the options
 *    every healed attempt carries (openai and Anthropic: what the SDK and fetch do with a
 *    signal); healed with no OpenTelemetry SDK (the API's no-op: selfheal's own cost); healed
 *    with a recording SDK (spans batched and dropped, metrics kept: what telemetry adds on top).
 * 2. The SDK's work alone: the openai and Anthropic calls on clients whose `fetch` answers in
 *    process with the bytes the fake provider sent (no socket, no server, no scheduling), so the
 *    µs healing adds stand out of the noise, split into what the SDK itself spends on the
 *    per-attempt options healing sets (`signal`, `maxRetries: 0`: "bare + attempt options") and
 *    selfheal's own. (`@google/genai` takes no `fetch`: over HTTP only.)
 *
 * The answer is REPLY_WORDS words (a token each when streamed). Before timing, every case must
 * give the whole answer with exactly one request. Each round runs every case (harness.ts's
 * rotatedRounds: tinybench, order rotated), timed by the clock and in this process's CPU time
 * (all its threads: what a call costs the machine, less blurred than the clock by a busy
 * machine's scheduling); a ratio is healed / bare within a round, reported as the median of the
 * rounds with the middle half and the extremes. Compare ratios, not absolute numbers.
 *
 * Run: npm run bench:clients-overhead [-- --rounds 21]   (writes bench/results/clients-overhead.json)
 * On another Node: PATH=/path/to/node24/bin:$PATH npx tsx bench/clients-overhead.ts --name
 * clients-overhead-node24 (the results name their Node; the SDKs' own cost differs by runtime).
 */
import { fork } from "node:child_process";
import { parseArgs } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { createSelfHealing } from "../dist/index.js";
import { healAnthropic } from "../dist/clients/anthropic.js";
import { healGoogleGenAI } from "../dist/clients/google-genai.js";
import { healOpenAI } from "../dist/clients/openai.js";
import { median, recordingSdk, report, rotatedRounds } from "./harness.js";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "21" },
    "stub-rounds": { type: "string", default: "11" },
    name: { type: "string", default: "clients-overhead" },
  },
});
const ROUNDS = Number(values.rounds);
const STUB_ROUNDS = Number(values["stub-rounds"]);
/** Goal (issue 43): a healed call costs at most this many times the bare SDK call. */
const GOAL_RATIO = 1.05;
const REPLY_WORDS = 50;
const REPLY = Array.from({ length: REPLY_WORDS }, (_, i) => `w${i + 1}`).join(" ");
const MODEL = { openai: "gpt-5-mini", anthropic: "claude-sonnet-4-5", gemini: "gemini-2.5-flash" };
const FALLBACK_MODEL = {
  openai: "gpt-5-nano",
  anthropic: "claude-haiku-4-5",
  gemini: "gemini-2.5-flash-lite",
};
const MAX_TOKENS = 1024;
const USER_TEXT = "Say the fifty words.";
const USER = [{ role: "user" as const, content: USER_TEXT }];

// ---------------------------------------------------------------------------------------------
// The fake provider, in its own process: `count` asks it how many requests it got.

type ServerMessage = { origin: string } | { requests: number };

const server = fork(new URL("./clients-overhead/server.mjs", import.meta.url), [REPLY], {
  execArgv: [],
  stdio: ["ignore", "inherit", "inherit", "ipc"],
});
const reply = (): Promise<ServerMessage> =>
  new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      reject(new Error(`the fake provider exited (${code})`));
    };
    server.once("exit", onExit);
    server.once("message", (m) => {
      server.off("exit", onExit);
      resolve(m as ServerMessage);
    });
  });
const started = await reply();
if (!("origin" in started)) throw new Error("the fake provider did not say where it listens");
const { origin } = started;
async function requestsSeen(): Promise<number> {
  const answer = reply();
  server.send("count");
  const m = await answer;
  if (!("requests" in m)) throw new Error("the fake provider did not count");
  return m.requests;
}

// ---------------------------------------------------------------------------------------------
// The calls, each given a client of its SDK and the request options: the answer's text.

interface Clients {
  openai: OpenAI;
  anthropic: Anthropic;
  gemini: GoogleGenAI;
}
type RequestOptions = { signal?: AbortSignal; maxRetries?: number } | undefined;

const CALLS = {
  "openai chat": async ({ openai }: Clients, options: RequestOptions) => {
    const completion = await openai.chat.completions.create(
      { model: MODEL.openai, messages: USER },
      options,
    );
    return completion.choices[0]?.message.content ?? "";
  },
  "openai chat, streamed": async ({ openai }: Clients, options: RequestOptions) => {
    const stream = await openai.chat.completions.create(
      { model: MODEL.openai, messages: USER, stream: true },
      options,
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    return text;
  },
  "anthropic messages": async ({ anthropic }: Clients, options: RequestOptions) => {
    const message = await anthropic.messages.create(
      { model: MODEL.anthropic, max_tokens: MAX_TOKENS, messages: USER },
      options,
    );
    return message.content.map((block) => (block.type === "text" ? block.text : "")).join("");
  },
  "anthropic messages, streamed": async ({ anthropic }: Clients, options: RequestOptions) => {
    const stream = await anthropic.messages.create(
      { model: MODEL.anthropic, max_tokens: MAX_TOKENS, messages: USER, stream: true },
      options,
    );
    let text = "";
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "text_delta")
        text += event.delta.text;
    }
    return text;
  },
  "gemini generateContent": async ({ gemini }: Clients) => {
    const answer = await gemini.models.generateContent({
      model: MODEL.gemini,
      contents: USER_TEXT,
    });
    return answer.text ?? "";
  },
  "gemini generateContent, streamed": async ({ gemini }: Clients) => {
    const stream = await gemini.models.generateContentStream({
      model: MODEL.gemini,
      contents: USER_TEXT,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.text ?? "";
    return text;
  },
};
type Call = keyof typeof CALLS;
const CALL_NAMES = Object.keys(CALLS) as Call[];
/** The calls of the SDKs that take a `fetch` (Stainless: openai, Anthropic). */
const FETCH_CALLS = CALL_NAMES.filter((call) => !call.startsWith("gemini"));

type Fetch = typeof globalThis.fetch;

/** The clients as users make them, over `fetch` (the SDK's own by default). */
function sdkClients(fetch?: Fetch): Clients {
  return {
    openai: new OpenAI({ baseURL: `${origin}/v1`, apiKey: "sk-fake", ...(fetch && { fetch }) }),
    anthropic: new Anthropic({ baseURL: origin, apiKey: "sk-fake", ...(fetch && { fetch }) }),
    gemini: new GoogleGenAI({ apiKey: "fake", httpOptions: { baseUrl: origin } }),
  };
}

const sdk = recordingSdk();
const providers = ["openai", "anthropic", "gcp.gemini", "fallback"].map((name) => ({ name }));
const instances = {
  "no SDK": createSelfHealing({ agent: "clients-overhead", recovery: { providers } }),
  "recording SDK": createSelfHealing({
    agent: "clients-overhead-sdk",
    recovery: { providers },
    tracerProvider: sdk.tracerProvider,
    meterProvider: sdk.meterProvider,
  }),
};
type Setup = keyof typeof instances;

/** The clients healed in one line, with a fallback model of the same provider. */
function healed(setup: Setup, clients: Clients): Clients {
  const sh = instances[setup];
  return {
    openai: healOpenAI(sh, clients.openai, {
      fallback: { provider: "fallback", model: FALLBACK_MODEL.openai },
    }),
    anthropic: healAnthropic(sh, clients.anthropic, {
      fallback: { provider: "fallback", model: FALLBACK_MODEL.anthropic },
    }),
    gemini: healGoogleGenAI(sh, clients.gemini, {
      fallback: { provider: "fallback", model: FALLBACK_MODEL.gemini },
    }),
  };
}

type Cases = Record<string, () => Promise<string>>;

/** Every case gives the whole answer with exactly one request (no retry, no second route). */
async function check(cases: Cases, requests: () => Promise<number> | number): Promise<void> {
  for (const [name, fn] of Object.entries(cases)) {
    const before = await requests();
    const text = await fn();
    const sent = (await requests()) - before;
    if (text.trim() !== REPLY || sent !== 1)
      throw new Error(`${name}: ${sent} requests, answer ${JSON.stringify(text.slice(0, 80))}`);
  }
}

// ---------------------------------------------------------------------------------------------
// 1. Over HTTP.

const http = sdkClients();
const httpHealed = {
  "no SDK": healed("no SDK", http),
  "recording SDK": healed("recording SDK", http),
};
const HTTP_CLIENTS = [
  "bare",
  "bare + attempt options",
  "healed, no SDK",
  "healed, recording SDK",
] as const;
/** What the SDK does with the options every healed attempt carries (a signal, retries off). */
const attemptOptions = () => ({ signal: new AbortController().signal, maxRetries: 0 });
const httpCases: Cases = {};
for (const call of CALL_NAMES) {
  httpCases[`${call} | bare`] = () => CALLS[call](http, undefined);
  // @google/genai takes no per-request options: its calls have no such case.
  if (FETCH_CALLS.includes(call))
    httpCases[`${call} | bare + attempt options`] = () => CALLS[call](http, attemptOptions());
  httpCases[`${call} | healed, no SDK`] = () => CALLS[call](httpHealed["no SDK"], undefined);
  httpCases[`${call} | healed, recording SDK`] = () =>
    CALLS[call](httpHealed["recording SDK"], undefined);
}
await check(httpCases, requestsSeen);

// ---------------------------------------------------------------------------------------------
// 2. The SDK's work alone: `fetch` answers with the bytes the fake provider sent for each call.

/** A request by its URL and whether it streams. */
const keyOf = (...[input, init]: Parameters<Fetch>) =>
  `${typeof init?.body === "string" && init.body.includes('"stream":true')} ${
    typeof input === "string" ? input : input instanceof URL ? input.href : input.url
  }`;
const recorded = new Map<string, { body: string; headers: [string, string][] }>();
const recording: Fetch = async (input, init) => {
  const res = await fetch(input, init);
  const body = await res.text();
  recorded.set(keyOf(input, init), { body, headers: [...res.headers] });
  return new Response(body, { status: res.status, headers: res.headers });
};
for (const call of FETCH_CALLS) await CALLS[call](sdkClients(recording), undefined);
let stubbed = 0;
const stub: Fetch = (input, init) => {
  stubbed++;
  const answer = recorded.get(keyOf(input, init));
  if (!answer) return Promise.reject(new Error(`nothing recorded for ${keyOf(input, init)}`));
  return Promise.resolve(new Response(answer.body, { status: 200, headers: answer.headers }));
};
const local = sdkClients(stub);
const localHealed = healed("no SDK", local);
const LOCAL_CLIENTS = ["bare", "bare + attempt options", "healed, no SDK"] as const;
const localCases: Cases = {};
for (const call of FETCH_CALLS) {
  localCases[`${call} | bare`] = () => CALLS[call](local, undefined);
  // What healing sends each attempt with: selfheal's signal and the SDK's retries off.
  localCases[`${call} | bare + attempt options`] = () => CALLS[call](local, attemptOptions());
  localCases[`${call} | healed, no SDK`] = () => CALLS[call](localHealed, undefined);
}
await check(localCases, () => stubbed);

// ---------------------------------------------------------------------------------------------

// A call over HTTP takes milliseconds here: one a tinybench iteration is timed well enough.
const httpSamples = await rotatedRounds(httpCases, { batch: 1, rounds: ROUNDS, pauseMs: 100 });
const served = await requestsSeen();
server.send("close");
const localSamples = await rotatedRounds(localCases, {
  batch: 5,
  rounds: STUB_ROUNDS,
  pauseMs: 100,
});
await Promise.all(Object.values(instances).map((sh) => sh.close()));
await sdk.tracerProvider.shutdown();
await sdk.meterProvider.shutdown();

type Samples = typeof httpSamples;
type Clock = keyof Samples;
const quantile = (xs: readonly number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? NaN;
const f2 = (x: number) => x.toFixed(2);
const us = (ns: number) => +(ns / 1000).toFixed(1);
/** The median of the rounds, their middle half and all of them: "1.02 (1.00..1.04; 0.95..1.10)". */
const spread = (xs: readonly number[]) =>
  `${f2(median(xs))} (${f2(quantile(xs, 0.25))}..${f2(quantile(xs, 0.75))}; ${f2(Math.min(...xs))}..${f2(Math.max(...xs))})`;

/** Per round, `client` against `base` for one call: the ratio and the ns added. */
function paired(samples: Samples, clock: Clock, call: Call, client: string, base = "bare") {
  const of = (c: string) => samples[clock][`${call} | ${c}`] ?? [];
  const b = of(base);
  const x = of(client);
  return {
    ratios: x.map((ns, i) => ns / (b[i] ?? NaN)),
    added: x.map((ns, i) => ns - (b[i] ?? NaN)),
    median: median(x),
  };
}

const rows = [
  ...CALL_NAMES.flatMap((call) =>
    HTTP_CLIENTS.filter((client) => `${call} | ${client}` in httpCases).map((client) => {
      const wall = paired(httpSamples, "ns", call, client);
      const cpu = paired(httpSamples, "cpuNs", call, client);
      return {
        over: "HTTP",
        call,
        client,
        "wall µs": us(wall.median),
        "CPU µs": us(cpu.median),
        ...(client !== "bare" && {
          "x bare, wall: median (middle half; all)": spread(wall.ratios),
          "x bare, CPU": spread(cpu.ratios),
          "CPU µs added": us(median(cpu.added)),
        }),
      };
    }),
  ),
  ...FETCH_CALLS.flatMap((call) =>
    LOCAL_CLIENTS.map((client) => {
      const cpu = paired(localSamples, "cpuNs", call, client);
      return {
        over: "in-process fetch",
        call,
        client,
        "wall µs": us(paired(localSamples, "ns", call, client).median),
        "CPU µs": us(cpu.median),
        ...(client !== "bare" && {
          "x bare, CPU": spread(cpu.ratios),
          "CPU µs added": us(median(cpu.added)),
        }),
      };
    }),
  ),
];

const ratio = (samples: Samples, clock: Clock, call: Call, client: string) =>
  +f2(median(paired(samples, clock, call, client).ratios));
const headline: Record<string, number> = {};
for (const call of CALL_NAMES) {
  headline[`${call}: healed / bare, HTTP, wall`] = ratio(httpSamples, "ns", call, "healed, no SDK");
  headline[`${call}: healed / bare, HTTP, CPU`] = ratio(
    httpSamples,
    "cpuNs",
    call,
    "healed, no SDK",
  );
}
const summary: Record<string, unknown> = { ...headline };
for (const call of CALL_NAMES) {
  summary[`${call}: healed / bare, HTTP, recording SDK, CPU`] = ratio(
    httpSamples,
    "cpuNs",
    call,
    "healed, recording SDK",
  );
}
for (const call of FETCH_CALLS) {
  const sdkShare = paired(localSamples, "cpuNs", call, "bare + attempt options");
  const selfheal = paired(localSamples, "cpuNs", call, "healed, no SDK", "bare + attempt options");
  summary[`${call}: CPU µs the SDK spends on the attempt options`] = us(median(sdkShare.added));
  summary[`${call}: CPU µs selfheal adds`] = us(median(selfheal.added));
  const httpSdk = paired(httpSamples, "cpuNs", call, "bare + attempt options");
  const httpSelfheal = paired(
    httpSamples,
    "cpuNs",
    call,
    "healed, no SDK",
    "bare + attempt options",
  );
  summary[`${call}: over HTTP, CPU µs the SDK and fetch spend on the attempt options`] = us(
    median(httpSdk.added),
  );
  summary[`${call}: over HTTP, CPU µs selfheal adds`] = us(median(httpSelfheal.added));
}
Object.assign(summary, {
  goal: `healed / bare <= ${GOAL_RATIO} over HTTP with no SDK, every call, by the clock and in CPU time`,
  met: Object.values(headline).every((r) => r <= GOAL_RATIO),
  "requests served": served,
});
report(values.name, rows, summary, {
  rounds: ROUNDS,
  stubRounds: STUB_ROUNDS,
  replyWords: REPLY_WORDS,
  samplesNs: { http: httpSamples, inProcess: localSamples },
});
