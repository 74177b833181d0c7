/**
 * What every provider client healed in one line shares (`selfheal/openai`, `selfheal/anthropic`,
 * `selfheal/google-genai`), with no SDK imported. A client module:
 *
 * 1. `const healing = clientHealing(sh, client, options, defaults)` checks the options (a
 *    SelfHealConfigError naming the field) and the routes (`fallback`, each provider declared in
 *    `recovery.providers` when there is more than one). A client healed before comes back as
 *    `healing.healed` (return it as it is).
 * 2. `const op = healing.operation({ name: "chat", operation: "chat", generate, stream, ... })`
 *    registers that operation's `sh.tool` / `sh.stream` pair (`openai.chat`,
 *    `openai.chat:stream`) once per instance and name. `generate(call, ctx)` and
 *    `stream(call, ctx)` run ONE attempt: `call.route(ctx.provider)` is the client and model
 *    override of the route selfheal picked; send the request with selfheal's `ctx.signal` and the
 *    SDK's own retries off (stainless.ts: `attemptOptions`).
 * 3. Each healed method builds a `ClientCall` and runs `op.generate(call, callOptions(...))`, or
 *    `openStream(op.stream(call, ...), onRestart)` for a streamed one.
 * 4. `return healing.proxy({ "chat.completions.create": healedCreate })`: the same client, its
 *    other members untouched.
 */
import type { Attributes } from "@opentelemetry/api";
import { SelfHealConfigError } from "../errors.js";
import type {
  CallOptions,
  HealedStream,
  Plans,
  SelfHealing,
  StreamFormat,
  StreamFunction,
  StreamMode,
  StreamRestart,
  ToolFunction,
  ToolSpanMode,
  HealedStreamFunction,
  WrappedTool,
} from "../index.js";
import { isStreamRestart } from "../engine/stream-channel.js";
import { SPAN_MODES } from "../engine/options/tool.js";
import {
  knownKeys,
  object,
  optionalChoice,
  optionalFunction,
  optionalString,
  show,
} from "../engine/options/validate.js";
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  genAiSpanName,
} from "../telemetry/conventions.js";
import { inFrameworkSpan } from "../adapters/ai-sdk/spans.js";

/** Another route of the same API: another client (base URL, Azure deployment) and/or model. */
export interface ClientRoute<R> {
  /** Its provider name (`gen_ai.provider.name`), declared in `recovery.providers`. */
  provider: string;
  /** The client to send the request to. Default: the healed client. */
  client?: R;
  /** The model to ask for instead of the request's. Default: the request's. */
  model?: string;
}

/**
 * Options of a healed client: the names and meanings of `healModel`'s (`selfheal/ai-sdk`), with
 * routes of the same API instead of models of any provider.
 */
export interface HealClientOptions<R> {
  /** Prefix of the selfheal tool names (`{name}.chat`, `{name}.chat:stream`). Default: the SDK's. */
  name?: string;
  /** The primary's provider name (`gen_ai.provider.name`). Default: the SDK's (`openai`, ...). */
  provider?: string;
  /**
   * Routes to fail over to, in order: another client of the same API and/or another model. With
   * a fallback, each provider name (the primary's too) must be declared in `recovery.providers`.
   */
  fallback?: ClientRoute<R> | readonly ClientRoute<R>[];
  /** Per attempt: a plain call, or a whole stream (default: none; streams have the limits below). */
  timeoutMs?: number;
  /** The whole call, recovery included. */
  deadlineMs?: number;
  /** Recovery chains by pattern for this client's calls. */
  plans?: Plans;
  /**
   * `child` (default): each call is a tool-call span under the active one. `attach`: selfheal
   * writes on the active span when it is a GenAI model span of this call (`chat gpt-4o`).
   */
  spans?: ToolSpanMode;
  /** A stream with no token this long after it started fails over (default 20 s). */
  firstTokenMs?: number;
  /** A stream silent this long after its first token fails (default 15 s). */
  idleMs?: number;
  /**
   * A stream that fails after chunks reached the caller: `fail` (default) errors it with a
   * StreamInterruptedError; `restart` streams the whole answer again from the next route, after
   * calling `onRestart`; `buffer` passes chunks on only once the stream is complete.
   */
  afterFirstToken?: StreamMode;
  /** Finish reasons that mean a streamed answer is incomplete (default: the API's). */
  failOnFinish?: readonly string[];
  /** Called when a `restart` stream starts its answer again: discard what you rendered. */
  onRestart?: (restart: StreamRestart) => void;
}

/** What a client module says about its SDK. */
export interface ClientDefaults {
  /** The function users call, for error messages (`healOpenAI`). */
  readonly caller: string;
  /** The default tool name prefix (`openai`). */
  readonly name: string;
  /** The default provider name (`openai`, `anthropic`, `gcp.gemini`). */
  readonly provider: string;
  /** What a client is, for messages: `an OpenAI client (new OpenAI())`. */
  readonly expected: string;
  /** Whether a value is a client of this SDK (by shape: no SDK is imported). */
  isClient(value: unknown): boolean;
}

/** One operation of an API (Chat Completions, Responses, Messages, generateContent). */
export interface OperationSpec<Call, R, Chunk> {
  /** Appended to the name prefix: `openai` + `chat` = `openai.chat` (streams `openai.chat:stream`). */
  readonly name: string;
  /** `gen_ai.operation.name` of its spans: `chat`, `generate_content`. */
  readonly operation: string;
  /** One plain attempt on the route of `ctx.provider`. */
  readonly generate: ToolFunction<Call, R>;
  /** One streamed attempt on the route of `ctx.provider`. */
  readonly stream: StreamFunction<Call, Chunk>;
  /** Whether a plain answer is empty (no text, no tool call). */
  readonly isEmpty: (answer: R) => boolean;
  /** How to read the stream's chunks. */
  readonly format: StreamFormat<Chunk>;
  /** The API's finish reasons that mean the answer is incomplete (`failOnFinish` overrides). */
  readonly failOnFinish: readonly string[];
}

/** A registered operation: its calls, each a selfheal call. */
export interface ClientOperation<Call, R, Chunk> {
  readonly operation: string;
  generate(call: Call, options: CallOptions): Promise<R>;
  stream(call: Call, options: CallOptions): HealedStream<Chunk | StreamRestart>;
}

/** One call of a healed method: the request as the caller made it, and the routes. */
export class ClientCall<R, P, O = unknown> {
  /** What the SDK method returned for the latest attempt (the answering one, once answered). */
  sent: unknown;
  /** The latest streamed attempt's stream, as the SDK opened it. */
  opened: unknown;

  constructor(
    /** The request body (its `model` is the primary's). */
    readonly params: P,
    /** The SDK's per-request options as the caller passed them. */
    readonly options: O | undefined,
    private readonly primary: R,
    private readonly routes: ReadonlyMap<string, ClientRoute<R>>,
    /** The SDK method each attempt calls, when an operation heals more than one (`parse`). */
    readonly method = "create",
  ) {}

  /** The client, and the model to ask for, of the route selfheal picked for this attempt. */
  route(provider: string | undefined): { client: R; model: string | undefined } {
    const route = provider === undefined ? undefined : this.routes.get(provider);
    return { client: route?.client ?? this.primary, model: route?.model };
  }

  /** `recordArguments` shows the request, not the options (a signal, headers). */
  toJSON(): unknown {
    return this.params;
  }
}

/** A client's healing on one instance: its options, routes and operations. */
export interface ClientHealing<R> {
  /** Set when the client was healed already with these options: return it as it is. */
  readonly healed: R | undefined;
  readonly options: HealClientOptions<R>;
  /** Calls of this client: a ClientCall over its routes (`method`: see ClientCall). */
  call<P, O>(params: P, options: O | undefined, method?: string): ClientCall<R, P, O>;
  operation<Call, A, Chunk>(spec: OperationSpec<Call, A, Chunk>): ClientOperation<Call, A, Chunk>;
  /** The client, its methods at these paths (`chat.completions.create`) replaced. */
  proxy(methods: Readonly<Record<string, (...args: never[]) => unknown>>): R;
}

const OPTION_KEYS = [
  "name",
  "provider",
  "fallback",
  "timeoutMs",
  "deadlineMs",
  "plans",
  "spans",
  "firstTokenMs",
  "idleMs",
  "afterFirstToken",
  "failOnFinish",
  "onRestart",
] as const satisfies readonly (keyof HealClientOptions<unknown>)[];

/** The healed clients (proxies): what they heal, on which instance, under which routes. */
const healedClients = new WeakMap<object, { raw: object; sh: SelfHealing; key: string }>();

/** The client behind a healed one (a fallback that was healed itself is called raw). */
export function unhealed<R>(client: R): R {
  const record = typeof client === "object" && client !== null && healedClients.get(client);
  return record ? (record.raw as R) : client;
}

/** Checks `heal*(sh, client, options)` and sets up the client's routes on `sh`. */
export function clientHealing<R extends object>(
  sh: SelfHealing,
  client: R,
  input: unknown,
  defaults: ClientDefaults,
): ClientHealing<R> {
  const { caller } = defaults;
  const instance = sh as Partial<SelfHealing> | null;
  if (typeof instance !== "object" || instance === null || typeof instance.tool !== "function") {
    throw new SelfHealConfigError(
      `${caller}(sh)`,
      `expected a selfheal instance (createSelfHealing()), got ${show(sh)}`,
    );
  }
  if (!defaults.isClient(client)) {
    throw new SelfHealConfigError(
      `${caller}(client)`,
      `expected ${defaults.expected}, got ${show(client)}`,
    );
  }
  const options = checkOptions(input, defaults);
  const prefix = options.name ?? defaults.name;
  const primary = options.provider ?? defaults.provider;
  const routes = fallbackRoutes(options, primary, caller);
  const providers = [primary, ...routes.keys()];
  const key = `${prefix}\u0000${providers.join("\u0000")}`;
  const previous = healedClients.get(client);
  if (previous && (previous.sh !== sh || previous.key !== key)) {
    throw new SelfHealConfigError(
      `${caller}(client)`,
      "this client is healed already (by another selfheal instance or with other routes); heal the original client instead",
    );
  }
  const raw = (previous?.raw ?? client) as R;
  return {
    healed: previous ? client : undefined,
    options,
    call: (params, requestOptions, method) =>
      new ClientCall(params, requestOptions, raw, routes, method),
    operation: (spec) =>
      clientOperation(
        register(sh, `${prefix}.${spec.name}`, providers, options, spec, caller),
        spec.operation,
        options.spans,
      ),
    proxy(methods) {
      const proxy = proxyOf(raw, treeOf(methods));
      healedClients.set(proxy, { raw, sh, key });
      return proxy;
    },
  };
}

function checkOptions(input: unknown, defaults: ClientDefaults): HealClientOptions<never> {
  const field = `${defaults.caller}.options`;
  const o = input === undefined ? {} : object(input, field);
  knownKeys(o, OPTION_KEYS, field);
  optionalString(o.name, `${field}.name`);
  if (o.name === "") throw new SelfHealConfigError(`${field}.name`, "expected a non-empty name");
  optionalString(o.provider, `${field}.provider`);
  const list = Array.isArray(o.fallback);
  const fallback = asList<unknown>(o.fallback);
  fallback.forEach((route, i) => {
    checkRoute(route, `${field}.fallback${list ? `[${i}]` : ""}`, defaults);
  });
  optionalChoice(o.spans, SPAN_MODES, `${field}.spans`);
  optionalFunction(o.onRestart, `${field}.onRestart`);
  // The limits, timeoutMs, deadlineMs, plans and failOnFinish are checked by sh.tool / sh.stream.
  return o;
}

function checkRoute(route: unknown, field: string, defaults: ClientDefaults): void {
  const o = object(route, field);
  knownKeys(o, ["provider", "client", "model"], field);
  if (typeof o.provider !== "string" || o.provider === "") {
    throw new SelfHealConfigError(
      `${field}.provider`,
      `required: the route's provider name, declared in recovery.providers, got ${show(o.provider)}`,
    );
  }
  if (o.client !== undefined && !defaults.isClient(unhealed(o.client))) {
    throw new SelfHealConfigError(
      `${field}.client`,
      `expected ${defaults.expected} (another base URL or deployment of the same API; another provider's API needs the AI SDK adapter, selfheal/ai-sdk), got ${show(o.client)}`,
    );
  }
  optionalString(o.model, `${field}.model`);
  if (o.client === undefined && (o.model === undefined || o.model === "")) {
    throw new SelfHealConfigError(
      field,
      "a route needs a `client` (another base URL or deployment), a `model`, or both",
    );
  }
}

function asList<T>(value: T | readonly T[] | undefined): readonly T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? (value as readonly T[]) : [value as T];
}

/** The fallback routes by provider name, in order; a healed client among them is used raw. */
function fallbackRoutes<R>(
  options: HealClientOptions<R>,
  primary: string,
  caller: string,
): ReadonlyMap<string, ClientRoute<R>> {
  const routes = new Map<string, ClientRoute<R>>();
  asList(options.fallback).forEach((route, i) => {
    const field = `${caller}.options.fallback${Array.isArray(options.fallback) ? `[${i}]` : ""}`;
    if (route.provider === primary) {
      throw new SelfHealConfigError(
        `${field}.provider`,
        `provider "${primary}" is the primary's: give the fallback its own provider name, declared in recovery.providers`,
      );
    }
    if (routes.has(route.provider)) {
      throw new SelfHealConfigError(
        `${field}.provider`,
        `provider "${route.provider}" is already a fallback: give each route its own provider name, declared in recovery.providers`,
      );
    }
    routes.set(route.provider, {
      provider: route.provider,
      ...(route.client !== undefined && { client: unhealed(route.client) }),
      ...(route.model !== undefined && { model: route.model }),
    });
  });
  return routes;
}

interface Registration {
  readonly providers: readonly string[];
  /** The options it was made with, as JSON. */
  readonly settings: string;
  readonly generate: WrappedTool<unknown, unknown>;
  readonly stream: HealedStreamFunction<unknown, unknown, StreamMode>;
}

/** Operations registered per instance, by tool name: `sh.tool` takes a name once. */
const registered = new WeakMap<SelfHealing, Map<string, Registration>>();

/** The operation's registration on `sh`, made on first use; a later one must list the same routes. */
function register<Call, R, Chunk>(
  sh: SelfHealing,
  name: string,
  providers: readonly string[],
  options: HealClientOptions<unknown>,
  spec: OperationSpec<Call, R, Chunk>,
  caller: string,
): Registration {
  let byName = registered.get(sh);
  if (!byName) registered.set(sh, (byName = new Map<string, Registration>()));
  const { timeoutMs, deadlineMs, plans, spans } = options;
  const { firstTokenMs, idleMs, afterFirstToken, failOnFinish } = options;
  // What the registration is made with: a later heal* of the same name must ask for the same, or
  // its options would be silently those of the first (and never checked).
  const settings = JSON.stringify([
    timeoutMs,
    deadlineMs,
    plans,
    spans,
    firstTokenMs,
    idleMs,
    afterFirstToken,
    failOnFinish,
  ]);
  const existing = byName.get(name);
  if (existing) {
    if (existing.providers.join("\u0000") !== providers.join("\u0000")) {
      throw new SelfHealConfigError(
        `${caller}.options.name`,
        `"${name}" is already healed with routes ${existing.providers.join(", ")}; give this client its own name`,
      );
    }
    if (existing.settings !== settings) {
      throw new SelfHealConfigError(
        `${caller}.options`,
        `"${name}" is already healed with other options (timeouts, plans, stream limits); give this client its own name`,
      );
    }
    return existing;
  }
  const shared = {
    readOnly: true, // a model call changes nothing: it is never refused
    kind: "llm" as const,
    // One route needs no declaration; failover routes must be declared in recovery.providers.
    ...(providers.length > 1 ? { providers } : { provider: providers[0] as string }),
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(deadlineMs !== undefined && { deadlineMs }),
    ...(plans !== undefined && { plans }),
    ...(spans !== undefined && { span: spans }),
  };
  const generate = sh.tool(name, { ...shared, isEmpty: spec.isEmpty }, spec.generate);
  const stream = sh.stream(
    `${name}:stream`,
    {
      ...shared,
      format: spec.format,
      failOnFinish: failOnFinish ?? spec.failOnFinish,
      ...(firstTokenMs !== undefined && { firstTokenMs }),
      ...(idleMs !== undefined && { idleMs }),
      ...(afterFirstToken !== undefined && { afterFirstToken }),
    },
    spec.stream,
  );
  const registration = { providers, settings, generate, stream } as unknown as Registration;
  byName.set(name, registration);
  return registration;
}

function clientOperation<Call, R, Chunk>(
  registration: Registration,
  operation: string,
  spans: ToolSpanMode | undefined,
): ClientOperation<Call, R, Chunk> {
  const { generate, stream } = registration as unknown as {
    generate: WrappedTool<Call, R>;
    stream: HealedStreamFunction<Call, Chunk, StreamMode>;
  };
  const spanNames = (options: CallOptions) => {
    const model = options.attributes?.[ATTR_GEN_AI_REQUEST_MODEL];
    return typeof model === "string" ? [genAiSpanName(operation, model)] : [];
  };
  return {
    operation,
    generate: (call, options) =>
      spans === "attach"
        ? inFrameworkSpan(spans, spanNames(options), () => generate(call, options))
        : generate(call, options),
    stream: (call, options) =>
      spans === "attach"
        ? inFrameworkSpan(spans, spanNames(options), () => stream(call, options))
        : stream(call, options),
  };
}

/**
 * The call options of one healed call: the caller's own signal (aborting it aborts the call,
 * recovery included), and the operation and requested model on its span.
 */
export function callOptions(
  operation: string,
  model: unknown,
  signal: AbortSignal | null | undefined,
): CallOptions {
  const attributes = spanAttributes(operation, typeof model === "string" ? model : undefined);
  return signal ? { signal, attributes } : { attributes };
}

/** Distinct (operation, model) attribute sets kept: a model name is the caller's text. */
const MAX_SPAN_ATTRIBUTE_SETS = 64;
const spanAttributeSets = new Map<string, Attributes>();

/**
 * A call's span attributes, frozen and kept by operation and model: the engine checks a frozen
 * set once, and a client calling the same model each time builds none.
 */
function spanAttributes(operation: string, model: string | undefined): Attributes {
  const key = model === undefined ? operation : `${operation}\0${model}`;
  let attributes = spanAttributeSets.get(key);
  if (attributes) return attributes;
  attributes = Object.freeze(
    model === undefined
      ? { [ATTR_GEN_AI_OPERATION_NAME]: operation }
      : { [ATTR_GEN_AI_OPERATION_NAME]: operation, [ATTR_GEN_AI_REQUEST_MODEL]: model },
  );
  if (spanAttributeSets.size < MAX_SPAN_ATTRIBUTE_SETS) spanAttributeSets.set(key, attributes);
  return attributes;
}

/**
 * The healed stream once its first item came (a failure before it rejects here, as the SDK's
 * own request would), as an iterator of the SDK's chunks: a StreamRestart (`restart`) is handed
 * to `onRestart` instead of the caller's loop, which reads the SDK's chunk types only. `ended`
 * answers a failure after the first item (the SDK's stream ends quietly when its caller aborted).
 */
export async function openStream<Chunk>(
  healed: HealedStream<Chunk | StreamRestart>,
  onRestart: ((restart: StreamRestart) => void) | undefined,
  ended?: (error: unknown) => IteratorResult<Chunk>,
): Promise<AsyncIterator<Chunk>> {
  const source = healed[Symbol.asyncIterator]();
  type Step = IteratorResult<Chunk> | Promise<IteratorResult<Chunk>>;
  // One promise per item: the restarts skipped and a failure answered in the same step.
  const reader = (fail: ((error: unknown) => IteratorResult<Chunk>) | undefined) => {
    const read = (step: IteratorResult<Chunk | StreamRestart>): Step => {
      if (step.done || !isStreamRestart(step.value)) return step as IteratorResult<Chunk>;
      onRestart?.(step.value);
      return source.next().then(read, fail);
    };
    return (): Promise<IteratorResult<Chunk>> => source.next().then(read, fail);
  };
  const next = reader(ended);
  const first = await reader(undefined)();
  let pending: Promise<IteratorResult<Chunk>> | undefined = Promise.resolve(first);
  return {
    next: () => {
      const step = pending ?? next();
      pending = undefined;
      return step;
    },
    return: async (value?: unknown) => {
      pending = undefined;
      await source.return?.();
      await healed.result.catch(() => undefined);
      return { done: true, value: value as Chunk };
    },
  };
}

/** A tree of paths: `chat.completions.create` -> chat -> completions -> create. */
type Tree = Map<string, Tree | ((...args: never[]) => unknown)>;

function treeOf(methods: Readonly<Record<string, (...args: never[]) => unknown>>): Tree {
  const root: Tree = new Map();
  for (const [path, method] of Object.entries(methods)) {
    const names = path.split(".");
    const last = names.pop() as string;
    let node = root;
    for (const name of names) {
      let child = node.get(name);
      if (!(child instanceof Map)) node.set(name, (child = new Map()));
      node = child;
    }
    node.set(last, method);
  }
  return root;
}

/**
 * `target` with the members of `tree` replaced: a namespace on the path is proxied in turn, a
 * method at its end is the healed one (when the SDK has it: an SDK without the member keeps its
 * value). Everything else is read from the real object, and a method read through the proxy runs
 * on the real object: SDK classes keep `#private` fields, which a proxy as `this` cannot reach.
 */
function proxyOf<T extends object>(target: T, tree: Tree): T {
  const members = new Map<PropertyKey, { value: unknown; member: unknown }>();
  const methods = new WeakMap<object, unknown>();
  const proxy: T = new Proxy(target, {
    get(t, key) {
      const value: unknown = Reflect.get(t, key, t);
      const node = typeof key === "string" ? tree.get(key) : undefined;
      if (node !== undefined) {
        const hit = members.get(key);
        if (hit && hit.value === value) return hit.member;
        const member =
          node instanceof Map
            ? typeof value === "object" && value !== null
              ? proxyOf(value, node)
              : value
            : typeof value === "function"
              ? node
              : value;
        members.set(key, { value, member });
        return member;
      }
      if (typeof value !== "function") return value;
      let method = methods.get(value);
      if (method === undefined) {
        method = fixed(t, key) ? value : onTarget(value, t, () => proxy);
        methods.set(value, method);
      }
      return method;
    },
    set: (t, key, value) => Reflect.set(t, key, value, t),
  });
  return proxy;
}

/** An own property that is neither writable nor configurable must read as itself (Proxy rules). */
function fixed(target: object, key: PropertyKey): boolean {
  const own = Object.getOwnPropertyDescriptor(target, key);
  return own !== undefined && own.configurable === false && own.writable === false;
}

/** `fn` called on `target` when called on the proxy (and as it is otherwise). */
function onTarget(fn: object, target: object, proxy: () => object): unknown {
  return new Proxy(fn, {
    apply: (f, self: unknown, args) =>
      Reflect.apply(f as (...a: unknown[]) => unknown, self === proxy() ? target : self, args),
  });
}
