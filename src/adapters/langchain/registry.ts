import { SelfHealConfigError } from "../../errors.js";
import type {
  HealedStreamFunction,
  SelfHealing,
  StreamFunction,
  StreamMode,
  StreamOptions,
  ToolKind,
  ToolOptions,
  WrappedTool,
} from "../../index.js";
import { runAttempt, type Invocation, type Outcome } from "./invocation.js";

/** What the adapter registered under a name: a tool, a model's calls, or a model's streams. */
type EntryKind = ToolKind | "stream";

interface Entry {
  readonly wrapped: unknown;
  readonly readOnly: boolean;
  readonly kind: EntryKind;
  /** The routes (providers, primary first) of a model tool: failover picks the model by them. */
  readonly routes: string;
  /** A stream's settings (limits, mode, finish reasons), which every caller shares. */
  readonly settings?: string;
}

/**
 * The selfheal tools the adapter registered, per instance and name. `sh.tool` refuses a name
 * twice, and agents are often built per request: every middleware and healed tool of one
 * instance shares one selfheal tool per name (one health scope, one breaker).
 */
const registries = new WeakMap<SelfHealing, Map<string, Entry>>();

/**
 * The selfheal tool for `name` on `sh`, registered with `options` the first time. Later callers
 * get the same tool; one that disagrees on what matters for safety (read-only, tool or model,
 * a model's failover routes) is a configuration error rather than a silent choice.
 */
export function registeredTool<R>(
  sh: SelfHealing,
  name: string,
  options: ToolOptions<Invocation<R>, Outcome<R>>,
): WrappedTool<Invocation<R>, Outcome<R>> {
  const registry = registryOf(sh);
  const kind = options.kind ?? "tool";
  const routes = (options.providers ?? [options.provider ?? ""]).join(", ");
  const existing = registry.get(name);
  if (existing) {
    checkSame(name, existing, options.readOnly, kind, routes);
    // Registered by this function with the same Invocation shape; only R is erased in the map.
    return existing.wrapped as WrappedTool<Invocation<R>, Outcome<R>>;
  }
  const wrapped = sh.tool(name, options, runAttempt);
  registry.set(name, { wrapped, readOnly: options.readOnly, kind, routes });
  return wrapped;
}

/**
 * The selfheal stream for `name` on `sh` (`healChatModelStream`), registered the first time; a
 * later caller gets the same stream, provided its routes and stream settings are the same.
 */
export function registeredStream<A, C, M extends StreamMode>(
  sh: SelfHealing,
  name: string,
  options: StreamOptions<A, C, M>,
  settings: string,
  fn: StreamFunction<A, C>,
): HealedStreamFunction<A, C, M> {
  const registry = registryOf(sh);
  const routes = (options.providers ?? [options.provider ?? ""]).join(", ");
  const existing = registry.get(name);
  if (existing) {
    checkSame(name, existing, true, "stream", routes);
    if (existing.settings !== settings) {
      throw new SelfHealConfigError(
        `langchain: stream "${name}"`,
        `already healed on this selfheal instance with other stream settings (${existing.settings ?? ""}, not ${settings}); give this one its own name`,
      );
    }
    return existing.wrapped as HealedStreamFunction<A, C, M>;
  }
  const wrapped = sh.stream(name, options, fn);
  registry.set(name, { wrapped, readOnly: true, kind: "stream", routes, settings });
  return wrapped;
}

function registryOf(sh: SelfHealing): Map<string, Entry> {
  let registry = registries.get(sh);
  if (!registry) {
    registry = new Map();
    registries.set(sh, registry);
  }
  return registry;
}

const KIND_NAMES: Readonly<Record<EntryKind, string>> = {
  tool: "a LangChain tool",
  llm: "the middleware's model calls",
  stream: "healChatModelStream",
};

function checkSame(
  name: string,
  existing: Entry,
  readOnly: boolean,
  kind: EntryKind,
  routes: string,
): void {
  if (existing.kind !== kind && (existing.kind === "stream" || kind === "stream")) {
    throw new SelfHealConfigError(
      `langchain: "${name}"`,
      `this name is taken by ${KIND_NAMES[existing.kind]} on this selfheal instance; give ${KIND_NAMES[kind]} another (its name option)`,
    );
  }
  if (existing.kind !== kind) {
    throw new SelfHealConfigError(
      `langchain: "${name}"`,
      "a LangChain tool and the model calls share this name; give the model calls another (model.name)",
    );
  }
  // The selfheal tool routes by the first registration's providers, each middleware picks the
  // model of a route from its own fallbacks: other routes would run the wrong model (or the
  // agent's own again) under another provider's name and breaker.
  if (kind !== "tool" && existing.routes !== routes) {
    throw new SelfHealConfigError(
      `langchain: model "${name}"`,
      `model calls of this selfheal instance are already healed with routes ${existing.routes || "(no provider)"}, not ${routes || "(no provider)"}; give these their own name (model.name) or the same provider and fallbacks`,
    );
  }
  if (existing.readOnly !== readOnly) {
    throw new SelfHealConfigError(
      `langchain: tool "${name}"`,
      `already registered on this selfheal instance as ${existing.readOnly ? "read-only" : "a write"}; declare it the same way everywhere`,
    );
  }
}
