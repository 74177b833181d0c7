/**
 * The SDK-independent core of the healed clients (src/clients/heal-client.ts): options and
 * routes checked with the field named, one registration per instance and name, the Proxy that
 * gives the same client back (SDK classes with `#private` fields), route selection per attempt,
 * the caller's signal, and a stream's restart markers kept out of the caller's loop.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  callOptions,
  clientHealing,
  openStream,
  unhealed,
  type ClientCall,
  type ClientDefaults,
} from "../../src/clients/heal-client.js";
import {
  HttpResponseError,
  StreamRestart,
  isSelfHealConfigError,
  type SelfHealing,
  type StreamFormat,
} from "../../src/index.js";
import { configError, virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

interface Params {
  model: string;
  text?: string;
}

/** An SDK-like client: namespaces built from the client, `#private` fields, a getter, a method. */
class FakeClient {
  readonly #key: string;
  readonly sent: { base: string; params: Params }[] = [];
  readonly chat: { completions: Completions };
  constructor(
    readonly base: string,
    key = "sk-test",
  ) {
    this.#key = key;
    this.chat = { completions: new Completions(this) };
  }
  get key(): string {
    return this.#key;
  }
  describe(): string {
    return `${this.base} ${this.#key}`;
  }
}

class Completions {
  readonly #client: FakeClient;
  constructor(client: FakeClient) {
    this.#client = client;
  }
  create(params: Params): Promise<string> {
    this.#client.sent.push({ base: this.#client.base, params });
    return Promise.resolve(`${this.#client.base}:${params.model}:${params.text ?? ""}`);
  }
  list(): string {
    return this.#client.base;
  }
}

const DEFAULTS: ClientDefaults = {
  caller: "healFake",
  name: "fake",
  provider: "fake",
  expected: "a FakeClient",
  isClient: (v) => v instanceof FakeClient,
};

const EVERY_CHUNK: StreamFormat<string> = {
  read: () => ({ token: true, answer: true }),
  completion: "end",
};

/** A healFake(sh, client, options) in the way a client module builds one. */
function healFake(
  sh: SelfHealing,
  client: FakeClient,
  options?: unknown,
  attempt: (call: ClientCall<FakeClient, Params>, provider: string | undefined) => string = (
    call,
    provider,
  ) => `${provider}`,
): FakeClient {
  const healing = clientHealing(sh, client, options, DEFAULTS);
  if (healing.healed) return healing.healed;
  const op = healing.operation({
    name: "chat",
    operation: "chat",
    generate: async (call: ClientCall<FakeClient, Params>, ctx) => {
      const { client: routeClient, model } = call.route(ctx.provider);
      attempt(call, ctx.provider);
      return routeClient.chat.completions.create(
        model === undefined ? call.params : { ...call.params, model },
      );
    },
    stream: async function* (call: ClientCall<FakeClient, Params>) {
      yield await Promise.resolve(call.params.text ?? "");
    },
    isEmpty: (answer: string) => answer === "",
    format: EVERY_CHUNK,
    failOnFinish: [],
  });
  return healing.proxy({
    "chat.completions.create": (params: Params) =>
      op.generate(healing.call(params, undefined), callOptions("chat", params.model, undefined)),
    // A path the client does not have: left as it is.
    "responses.create": () => "never",
  });
}

describe("the healed client", () => {
  it("is the same client: its type, its class, its #private members, its other methods", async () => {
    const { sh } = virtualInstance();
    const client = new FakeClient("http://a");
    const healed = healFake(sh, client);
    expectTypeOf(healed).toEqualTypeOf<FakeClient>();
    expect(healed).toBeInstanceOf(FakeClient);
    expect(healed.key).toBe("sk-test"); // a getter reading #key through the proxy
    expect(healed.describe()).toBe("http://a sk-test"); // a method reading #key, called on the proxy
    expect(healed.chat.completions.list()).toBe("http://a");
    const read = (o: object, key: string): unknown => Reflect.get(o, key);
    expect(read(healed, "describe")).toBe(read(healed, "describe")); // one function per member
    expect(healed.chat).toBe(healed.chat);
    expect(healed.sent).toBe(client.sent);
    expect("responses" in healed).toBe(false);
    expect(Object.keys(healed)).toEqual(Object.keys(client));
    expect(await healed.chat.completions.create({ model: "m", text: "hi" })).toBe("http://a:m:hi");
    expect(client.sent).toHaveLength(1);
    // The unhealed client is untouched.
    expect(read(client.chat.completions, "create")).toBe(read(Completions.prototype, "create"));
    expect(unhealed(healed)).toBe(client);
    expect(unhealed(client)).toBe(client);
  });

  it("writes through to the real client", () => {
    const { sh } = virtualInstance();
    const client = new FakeClient("http://a");
    const healed = healFake(sh, client) as FakeClient & { extra?: number };
    healed.extra = 1;
    expect((client as FakeClient & { extra?: number }).extra).toBe(1);
  });

  it("makes each call a selfheal call of the operation's name", async () => {
    const { sh } = virtualInstance();
    const names: string[] = [];
    sh.on("tool-call", (e) => names.push(e.tool));
    const healed = healFake(sh, new FakeClient("http://a"), { name: "mine" });
    await healed.chat.completions.create({ model: "m" });
    expect(names).toEqual(["mine.chat"]);
  });

  it("fails over per attempt: ctx.provider picks the route's client and model", async () => {
    const { sh, clock } = virtualInstance({
      recovery: { providers: [{ name: "a" }, { name: "b" }, { name: "c" }], random: () => 0 },
    });
    const a = new FakeClient("http://a");
    const b = new FakeClient("http://b");
    const seen: (string | undefined)[] = [];
    const healed = healFake(
      sh,
      a,
      {
        provider: "a",
        fallback: [
          { provider: "b", client: b },
          { provider: "c", model: "small" },
        ],
      },
      (_call, provider) => {
        seen.push(provider);
        if (provider !== "c") {
          throw new HttpResponseError(503, new Headers(), "down", "http://x");
        }
        return "";
      },
    );
    expect(await clock.run(healed.chat.completions.create({ model: "big" }))).toBe(
      "http://a:small:",
    );
    expect([...new Set(seen)]).toEqual(["a", "b", "c"]); // the plan may retry a route first
  });

  it("spans: attach writes on an active GenAI span of the call's model, never on another", async () => {
    const tracing = recordingProvider();
    const { sh } = virtualInstance({ tracerProvider: tracing.provider });
    const healed = healFake(sh, new FakeClient("http://a"), { spans: "attach" });
    const tracer = tracing.provider.getTracer("test");
    for (const name of ["chat m", "request"]) {
      await tracer.startActiveSpan(name, async (span) => {
        await healed.chat.completions.create({ model: "m" });
        span.end();
      });
    }
    const byName = (name: string) => tracing.spans().filter((s) => s.name === name);
    // The model's own span took selfheal's attributes; the request span got a child instead.
    expect(byName("chat m")[0]?.attributes).toMatchObject({ "selfheal.call.outcome": "success" });
    expect(byName("request")[0]?.attributes["selfheal.call.outcome"]).toBeUndefined();
    expect(byName("agent.tool_call")).toHaveLength(1);
  });

  it("heals the same client once: again with the same routes is the same client", () => {
    const { sh } = virtualInstance();
    const client = new FakeClient("http://a");
    const healed = healFake(sh, client);
    expect(healFake(sh, healed)).toBe(healed);
    const { sh: other } = virtualInstance();
    expect(configError(() => healFake(other, healed)).field).toBe("healFake(client)");
    expect(configError(() => healFake(sh, healed, { name: "x" })).message).toMatch(
      /healed already/,
    );
  });

  it("shares one registration per instance and name; other routes need another name", () => {
    const { sh } = virtualInstance({
      recovery: { providers: [{ name: "fake" }, { name: "b" }] },
    });
    healFake(sh, new FakeClient("http://a"));
    healFake(sh, new FakeClient("http://b")); // same name, same routes: the same registration
    const e = configError(() =>
      healFake(sh, new FakeClient("http://c"), { fallback: { provider: "b", model: "m" } }),
    );
    expect(e.field).toBe("healFake.options.name");
    expect(e.message).toMatch(/already healed with routes fake/);
    healFake(sh, new FakeClient("http://c"), {
      name: "other",
      fallback: { provider: "b", model: "m" },
    });
    // Same name and routes, other options: refused, not silently those of the first.
    const options = configError(() => healFake(sh, new FakeClient("http://d"), { idleMs: 5 }));
    expect(options.field).toBe("healFake.options");
    expect(options.message).toMatch(/already healed with other options/);
    configError(() =>
      healFake(sh, new FakeClient("http://d"), { afterFirstToken: "maybe" as unknown as "fail" }),
    );
    healFake(sh, new FakeClient("http://d"), { idleMs: 5, name: "limits" });
  });

  it("calls a healed fallback raw: one selfheal call per request", async () => {
    const { sh } = virtualInstance({
      recovery: { providers: [{ name: "fake" }, { name: "b" }], random: () => 0 },
    });
    const names: string[] = [];
    sh.on("tool-call", (e) => names.push(e.tool));
    const b = healFake(sh, new FakeClient("http://b"), { name: "b" });
    const healed = healFake(sh, new FakeClient("http://a"), {
      fallback: { provider: "b", client: b },
    });
    // Before any call: the route's client is the raw one.
    expect(unhealed(b)).not.toBe(b);
    const answer = await healed.chat.completions.create({ model: "m" });
    expect(answer).toBe("http://a:m:");
    expect(names).toEqual(["fake.chat"]);
  });
});

describe("options", () => {
  const { sh } = virtualInstance({ recovery: { providers: [{ name: "fake" }, { name: "b" }] } });
  const client = new FakeClient("http://a");
  const field = (options: unknown) => configError(() => healFake(sh, client, options)).field;

  it.each([
    [{ nope: 1 }, "healFake.options.nope"],
    ["x", "healFake.options"],
    [{ name: 3 }, "healFake.options.name"],
    [{ name: "" }, "healFake.options.name"],
    [{ provider: 3 }, "healFake.options.provider"],
    [{ spans: "both" }, "healFake.options.spans"],
    [{ onRestart: "x" }, "healFake.options.onRestart"],
    [{ fallback: "b" }, "healFake.options.fallback"],
    [{ fallback: { model: "m" } }, "healFake.options.fallback.provider"],
    [{ fallback: [{ provider: "b" }] }, "healFake.options.fallback[0]"],
    [{ fallback: [{ provider: "b", client: {} }] }, "healFake.options.fallback[0].client"],
    [{ fallback: { provider: "b", model: 4 } }, "healFake.options.fallback.model"],
    [{ fallback: { provider: "b", model: "m", x: 1 } }, "healFake.options.fallback.x"],
    [{ fallback: { provider: "fake", model: "m" } }, "healFake.options.fallback.provider"],
    [
      {
        fallback: [
          { provider: "b", model: "m" },
          { provider: "b", model: "n" },
        ],
      },
      "healFake.options.fallback[1].provider",
    ],
  ])("%j is refused at %s", (options, name) => {
    expect(field(options)).toBe(name);
  });

  it("says why a route to another SDK's client is refused", () => {
    const e = configError(() =>
      healFake(sh, client, { name: "n1", fallback: { provider: "b", client: { chat: {} } } }),
    );
    expect(e.message).toMatch(/selfheal\/ai-sdk/);
  });

  it("refuses a fallback provider not declared in recovery.providers (at heal time)", () => {
    const e = configError(() =>
      healFake(sh, client, { name: "n2", fallback: { provider: "nowhere", model: "m" } }),
    );
    expect(e.message).toMatch(/not declared in recovery\.providers/);
  });

  it("refuses what is not a selfheal instance or not a client", () => {
    expect(configError(() => healFake({} as SelfHealing, client)).field).toBe("healFake(sh)");
    expect(configError(() => clientHealing(sh, { chat: {} }, undefined, DEFAULTS)).field).toBe(
      "healFake(client)",
    );
  });

  it("passes the limits to sh.stream, which checks them", () => {
    try {
      healFake(sh, client, { name: "n3", idleMs: -1 });
      expect.unreachable();
    } catch (e) {
      expect(isSelfHealConfigError(e)).toBe(true);
    }
  });
});

describe("callOptions", () => {
  it("carries the caller's signal and the requested model", () => {
    const signal = new AbortController().signal;
    expect(callOptions("chat", "gpt", signal)).toEqual({
      signal,
      attributes: { "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt" },
    });
    expect(callOptions("generate_content", undefined, null)).toEqual({
      attributes: { "gen_ai.operation.name": "generate_content" },
    });
  });
});

describe("openStream", () => {
  const streamOf = (items: unknown[], result: Promise<unknown> = Promise.resolve()) => ({
    result: result as never,
    async *[Symbol.asyncIterator]() {
      for (const item of items) yield await Promise.resolve(item);
    },
  });

  it("hands restart markers to onRestart, chunks to the loop", async () => {
    const restart = new StreamRestart(2, 2, "b", new Error("cut"));
    const restarts: StreamRestart[] = [];
    const iterator = await openStream(streamOf(["a", "b", restart, "A", "B"]), (r) =>
      restarts.push(r),
    );
    const seen: string[] = [];
    for (let step = await iterator.next(); !step.done; step = await iterator.next())
      seen.push(step.value as string);
    expect(seen).toEqual(["a", "b", "A", "B"]);
    expect(restarts).toEqual([restart]);
  });

  it("rejects when the stream fails before its first chunk", async () => {
    const failing = {
      result: Promise.reject(new Error("x")).catch(() => undefined) as never,
      [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error("429")) }),
    };
    await expect(openStream(failing, undefined)).rejects.toThrow("429");
  });

  it("return() ends the healed stream", async () => {
    let ended = false;
    const source = {
      result: Promise.resolve() as never,
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.resolve({ done: false, value: "a" }),
        return: () => {
          ended = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      }),
    };
    const iterator = await openStream(source, undefined);
    expect(await iterator.next()).toEqual({ done: false, value: "a" });
    await iterator.return?.();
    expect(ended).toBe(true);
  });
});
