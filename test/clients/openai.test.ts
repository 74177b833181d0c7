/**
 * `healOpenAI` end to end: the real `openai` package (7.60 and 6.49) against the fake provider
 * on 127.0.0.1 speaking OpenAI's wire format (Chat Completions and Responses, JSON, OpenAI's
 * error bodies and headers). Plain calls: answers and usage, a 429 with Retry-After (exactly two
 * requests: the SDK's own retries are off), 5xx, 401 (not retried, the SDK's error), an empty
 * answer, a truncated one, failover to another client and to another model, withResponse(), and
 * the same client type back. selfheal runs on a VirtualClock that the tests advance.
 */
import type { TracerProvider } from "@opentelemetry/api";
import OpenAI7, { AzureOpenAI } from "openai";
import OpenAI6 from "openai6";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { healOpenAI, type HealOpenAIOptions } from "../../src/clients/openai.js";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  type RecoveryOptions,
  type SelfHealing,
  type ToolCallEvent,
} from "../../src/index.js";
import { startFakeProvider, VirtualClock, type FakeProvider } from "../../src/testing/index.js";
import { eventually } from "../helpers/otlp.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

const REPLY = "The answer is forty two.";
const TOKENS = REPLY.split(" ").length;
/** The input tokens the fake provider reports for every request. */
const PROMPT_TOKENS = 10;
/** Far beyond any wait a test lets pass: the call's deadline never decides a test. */
const NEVER_MS = 3_600_000;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

/** The SDK majors under test, as one constructor type (their shapes are the same). */
const SDKS = { "openai 7.60": OpenAI7, "openai 6.49": OpenAI6 as unknown as typeof OpenAI7 };

/** The two APIs: one request, and the text of its answer. */
const APIS = {
  "Chat Completions": {
    path: "chat_completions",
    ask: (client: OpenAI7, model = "gpt-test", options?: OpenAI7.RequestOptions) =>
      client.chat.completions.create(
        { model, messages: [{ role: "user", content: "hi" }] },
        options,
      ),
    text: (answer: unknown) =>
      (answer as OpenAI7.ChatCompletion).choices[0]?.message.content ?? undefined,
    finish: (answer: unknown) => (answer as OpenAI7.ChatCompletion).choices[0]?.finish_reason,
  },
  Responses: {
    path: "responses",
    ask: (client: OpenAI7, model = "gpt-test", options?: OpenAI7.RequestOptions) =>
      client.responses.create({ model, input: "hi" }, options),
    text: (answer: unknown) => (answer as OpenAI7.Responses.Response).output_text,
    finish: (answer: unknown) => (answer as OpenAI7.Responses.Response).status,
  },
} as const;

async function server(): Promise<FakeProvider> {
  const provider = await startFakeProvider({ reply: REPLY, tokenIntervalMs: 1 });
  open.push(provider);
  return provider;
}

function instance(recovery: RecoveryOptions = {}, tracerProvider?: TracerProvider) {
  const clock = new VirtualClock();
  const meters = recordingMeters();
  const sh = createSelfHealing({
    agent: "openai-client",
    clock,
    meterProvider: meters.meterProvider,
    ...(tracerProvider && { tracerProvider }),
    logger: { warn: () => undefined },
    recovery: { random: () => 0, deadlineMs: NEVER_MS, ...recovery },
  });
  open.push(sh, { close: () => meters.shutdown() });
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const diagnosed: string[] = [];
  sh.on("diagnosis", (e) => diagnosed.push(e.pattern));
  return { sh, clock, calls, meters, diagnosed };
}

/**
 * Lets virtual time pass in small steps until `done`: a wait selfheal chose (Retry-After, a
 * backoff) passes, while real requests run at their own pace.
 */
async function advanceUntil(clock: VirtualClock, done: () => boolean, what: string) {
  const until = Date.now() + 30_000;
  while (!done()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await clock.advance(250);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A client as users make one: the SDK's defaults (2 retries of its own) left as they are. */
function clientOf(SDK: typeof OpenAI7, provider: FakeProvider): OpenAI7 {
  return new SDK({ baseURL: provider.url, apiKey: "sk-fake" });
}

for (const [sdkName, SDK] of Object.entries(SDKS)) {
  for (const [apiName, api] of Object.entries(APIS)) {
    describe(`healOpenAI, ${sdkName}, ${apiName}`, () => {
      const heal = (sh: SelfHealing, client: OpenAI7, options?: HealOpenAIOptions) =>
        healOpenAI(sh, client, options);
      const tool = apiName === "Responses" ? "openai.responses" : "openai.chat";

      it("answers as the SDK does, one selfheal call with its tokens", async () => {
        const provider = await server();
        const { sh, calls, meters } = instance({
          providers: [{ name: "openai", usdPer1kTokens: 1000 }],
        });
        const client = heal(sh, clientOf(SDK, provider));
        const answer = await api.ask(client);
        expect(api.text(answer)).toBe(REPLY);
        expect(provider.requests).toBe(1);
        expect(calls.map((c) => [c.tool, c.outcome, c.empty])).toEqual([[tool, "success", false]]);
        // Priced at $1 a token: input and output tokens were reported.
        const points = await meters.read();
        const cost = [...points].find(([k]) => k.startsWith("selfheal_llm_cost_usd"))?.[1];
        expect(cost).toBe(PROMPT_TOKENS + TOKENS);
      });

      it("a 429 with Retry-After is exactly two requests: the SDK's retries are off", async () => {
        const provider = await server();
        provider.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 1 });
        const { sh, clock, calls, diagnosed } = instance();
        const client = heal(sh, clientOf(SDK, provider));
        const answer = api.ask(client);
        await eventually(() => diagnosed.length === 1, "the 429's diagnosis");
        expect(diagnosed).toEqual(["RATE_LIMIT"]);
        // Retry-After: 1 is honoured: nothing is sent again before the second has passed.
        await clock.advance(900);
        expect(provider.requests).toBe(1);
        await advanceUntil(clock, () => provider.requests === 2, "the retry");
        expect(api.text(await answer)).toBe(REPLY);
        expect(provider.requests).toBe(2);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("a 503 is retried", async () => {
        const provider = await server();
        provider.injector.inject("http_503", { first: 1 });
        const { sh, clock, calls } = instance();
        const answer = api.ask(heal(sh, clientOf(SDK, provider)));
        await advanceUntil(clock, () => provider.requests === 2, "the retry");
        expect(api.text(await answer)).toBe(REPLY);
        expect(provider.requests).toBe(2);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("a 401 is not retried: escalated at once, the SDK's AuthenticationError its cause", async () => {
        const provider = await server();
        provider.injector.inject("auth", { first: 10 });
        const { sh, calls } = instance();
        const error: unknown = await api.ask(heal(sh, clientOf(SDK, provider))).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isHumanEscalationRequiredError(error)).toBe(true);
        expect(error).toMatchObject({ pattern: "AUTH", tool });
        expect((error as Error).message).toMatch(/failed with AUTH/);
        const cause = (error as Error).cause;
        expect(cause).toBeInstanceOf(SDK.AuthenticationError);
        expect(cause).toMatchObject({ status: 401 });
        expect(provider.requests).toBe(1);
        expect(calls.map((c) => c.outcome)).toEqual(["error"]);
      });

      it("an empty answer is told, and asked again", async () => {
        const provider = await server();
        provider.injector.inject("empty", { first: 1 });
        const { sh, clock, calls } = instance();
        const answer = api.ask(heal(sh, clientOf(SDK, provider)));
        await advanceUntil(clock, () => provider.requests === 2, "the second request");
        expect(api.text(await answer)).toBe(REPLY);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("a truncated plain answer is the SDK's answer, as it is (streams fail it)", async () => {
        const provider = await server();
        provider.injector.inject("finish_length", { first: 1 }, { afterTokens: 2 });
        const { sh, calls } = instance();
        const answer = await api.ask(heal(sh, clientOf(SDK, provider)));
        expect(api.finish(answer)).toBe(apiName === "Responses" ? "incomplete" : "length");
        expect(provider.requests).toBe(1);
        expect(calls.map((c) => c.outcome)).toEqual(["success"]);
      });

      it("fails over to another client of the same API (another base URL)", async () => {
        const [primary, secondary] = [await server(), await server()];
        primary.injector.inject("http_503", { first: 100 });
        const { sh, clock, calls } = instance({
          providers: [{ name: "openai" }, { name: "backup" }],
        });
        const client = heal(sh, clientOf(SDK, primary), {
          fallback: { provider: "backup", client: clientOf(SDK, secondary) },
        });
        const answer = api.ask(client);
        await advanceUntil(clock, () => secondary.requests === 1, "the failover");
        expect(api.text(await answer)).toBe(REPLY);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("fails over to another model of the same client", async () => {
        const provider = await server();
        provider.injector.inject("http_503", { first: 2 });
        const { sh, clock } = instance({ providers: [{ name: "big" }, { name: "small" }] });
        const client = heal(sh, clientOf(SDK, provider), {
          provider: "big",
          fallback: { provider: "small", model: "gpt-small" },
        });
        const answer = api.ask(client, "gpt-big");
        await advanceUntil(clock, () => provider.requests === 3, "the failover");
        expect(api.text(await answer)).toBe(REPLY);
        expect(provider.bodies.map((b) => b.model)).toEqual(["gpt-big", "gpt-big", "gpt-small"]);
      });

      it("the call's span names the request in GenAI terms: the route that answered", async () => {
        const provider = await server();
        provider.injector.inject("http_503", { first: 2 });
        const tracing = recordingProvider();
        const { sh, clock } = instance(
          { providers: [{ name: "big" }, { name: "small" }] },
          tracing.provider,
        );
        const client = heal(sh, clientOf(SDK, provider), {
          provider: "big",
          fallback: { provider: "small", model: "gpt-small" },
        });
        const answer = api.ask(client, "gpt-big");
        await advanceUntil(clock, () => provider.requests === 3, "the failover");
        await answer;
        const [span] = tracing.named("agent.tool_call");
        expect(span?.attributes).toMatchObject({
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "openai",
          "gen_ai.request.model": "gpt-small",
          "gen_ai.response.model": "gpt-small",
          "gen_ai.usage.input_tokens": PROMPT_TOKENS,
          "gen_ai.usage.output_tokens": TOKENS,
          "selfheal.call.outcome": "recovered",
        });
      });

      it("keeps withResponse(): the answering attempt's response and request id", async () => {
        const provider = await server();
        provider.injector.inject("http_500", { first: 1 });
        const { sh, clock } = instance();
        const pending = api.ask(heal(sh, clientOf(SDK, provider))).withResponse();
        await advanceUntil(clock, () => provider.requests === 2, "the retry");
        const { data, response, request_id } = await pending;
        expect(api.text(data)).toBe(REPLY);
        expect(response.status).toBe(200);
        expect(request_id).toBe(response.headers.get("x-request-id"));
      });

      it("the caller's signal ends the call (APIUserAbortError), no retry after it", async () => {
        const provider = await server();
        provider.injector.inject("hang", { first: 1 });
        const { sh } = instance();
        const caller = new AbortController();
        const answer = api.ask(heal(sh, clientOf(SDK, provider)), "m", {
          signal: caller.signal,
        });
        await eventually(() => provider.requests === 1, "the request");
        caller.abort(new Error("user left"));
        // As from the unhealed client: the SDK's own error for a request its caller aborted.
        await expect(answer).rejects.toBeInstanceOf(SDK.APIUserAbortError);
        expect(provider.requests).toBe(1);
      });
    });
  }

  describe(`healOpenAI, ${sdkName}: the SDK's helpers`, () => {
    it("parse() is healed: each attempt runs the SDK's own parse()", async () => {
      for (const [tool, parse] of [
        [
          "openai.chat",
          (client: OpenAI7) =>
            client.chat.completions
              .parse({ model: "m", messages: [{ role: "user", content: "hi" }] })
              .then((c) => c.choices[0]?.message.content),
        ],
        [
          "openai.responses",
          (client: OpenAI7) =>
            client.responses.parse({ model: "m", input: "hi" }).then((r) => r.output_text),
        ],
      ] as const) {
        const provider = await server();
        provider.injector.inject("http_503", { first: 1 });
        const { sh, clock, calls } = instance();
        const answer = parse(healOpenAI(sh, clientOf(SDK, provider)));
        await advanceUntil(clock, () => provider.requests === 2, "the retry");
        expect(await answer).toBe(REPLY);
        expect(calls.map((c) => [c.tool, c.outcome])).toEqual([[tool, "recovered"]]);
      }
    });

    it("runTools() sends its requests through the healed client", async () => {
      const provider = await server();
      provider.injector.inject("http_503", { first: 1 });
      const { sh, clock, calls } = instance();
      const client = healOpenAI(sh, clientOf(SDK, provider));
      const runner = client.chat.completions.runTools({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        tools: [],
      });
      const content = runner.finalContent();
      await advanceUntil(clock, () => provider.requests === 2, "the retry");
      expect(await content).toBe(REPLY);
      expect(calls.map((c) => [c.tool, c.outcome])).toEqual([["openai.chat", "recovered"]]);
    });
  });

  describe(`healOpenAI, ${sdkName}: the client`, () => {
    it("is the same client, every other member its own", async () => {
      const provider = await server();
      const { sh } = instance();
      const raw = clientOf(SDK, provider);
      const client = healOpenAI(sh, raw);
      expect(client).toBeInstanceOf(SDK);
      expect(client.baseURL).toBe(raw.baseURL);
      expect(client.apiKey).toBe("sk-fake");
      expect(client.models).toBe(raw.models);
      expect(healOpenAI(sh, client)).toBe(client);
      // An unhealed member works through the proxy (it reads the client's #private fields).
      const models = client.withOptions({ timeout: 1_000 });
      expect(models).toBeInstanceOf(SDK);
      // The client healed is untouched.
      expect(Reflect.get(raw.chat.completions, "create")).toBe(
        Reflect.get(SDK.Chat.Completions.prototype, "create"),
      );
    });
  });
}

describe("types", () => {
  it("gives the same client type back", () => {
    const { sh } = instance();
    expectTypeOf(healOpenAI(sh, new OpenAI7({ apiKey: "k" }))).toEqualTypeOf<OpenAI7>();
    expectTypeOf(
      healOpenAI(sh, new OpenAI6({ apiKey: "k" }), { name: "v6" }),
    ).toEqualTypeOf<OpenAI6>();
    const azure = new AzureOpenAI({ apiKey: "k", endpoint: "http://x", apiVersion: "v" });
    expectTypeOf(healOpenAI(sh, azure, { name: "azure" })).toEqualTypeOf<AzureOpenAI>();
    // An Azure deployment as the fallback of an OpenAI client, and the other way round.
    expectTypeOf(healOpenAI<OpenAI7>)
      .parameter(2)
      .toExtend<HealOpenAIOptions | undefined>();
    const options: HealOpenAIOptions = { fallback: { provider: "azure", client: azure } };
    expect(options.fallback).toBeDefined();
  });
});
