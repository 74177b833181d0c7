import { SelfHealConfigError } from "../../errors.js";
import type { SelfHealing, ToolKind, ToolOptions, WrappedTool } from "../../index.js";
import { runAttempt, type Invocation, type Outcome } from "./invocation.js";

interface Entry {
  readonly wrapped: unknown;
  readonly readOnly: boolean;
  readonly kind: ToolKind;
}

/**
 * The selfheal tools the adapter registered, per instance and name. `sh.tool` refuses a name
 * twice, and agents are often built per request: every middleware and healed tool of one
 * instance shares one selfheal tool per name (one health scope, one breaker).
 */
const registries = new WeakMap<SelfHealing, Map<string, Entry>>();

/**
 * The selfheal tool for `name` on `sh`, registered with `options` the first time. Later callers
 * get the same tool; one that disagrees on what matters for safety (read-only, tool or model)
 * is a configuration error rather than a silent choice.
 */
export function registeredTool<R>(
  sh: SelfHealing,
  name: string,
  options: ToolOptions<Invocation<R>, Outcome<R>>,
): WrappedTool<Invocation<R>, Outcome<R>> {
  let registry = registries.get(sh);
  if (!registry) {
    registry = new Map();
    registries.set(sh, registry);
  }
  const kind = options.kind ?? "tool";
  const existing = registry.get(name);
  if (existing) {
    checkSame(name, existing, options.readOnly, kind);
    // Registered by this function with the same Invocation shape; only R is erased in the map.
    return existing.wrapped as WrappedTool<Invocation<R>, Outcome<R>>;
  }
  const wrapped = sh.tool(name, options, runAttempt);
  registry.set(name, { wrapped, readOnly: options.readOnly, kind });
  return wrapped;
}

function checkSame(name: string, existing: Entry, readOnly: boolean, kind: ToolKind): void {
  if (existing.kind !== kind) {
    throw new SelfHealConfigError(
      `langchain: "${name}"`,
      "a LangChain tool and the model calls share this name; give the model calls another (model.name)",
    );
  }
  if (existing.readOnly !== readOnly) {
    throw new SelfHealConfigError(
      `langchain: tool "${name}"`,
      `already registered on this selfheal instance as ${existing.readOnly ? "read-only" : "a write"}; declare it the same way everywhere`,
    );
  }
}
