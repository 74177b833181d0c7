import type { ToolCall } from "@langchain/core/messages/tool";
import type { StructuredToolInterface, ToolRunnableConfig } from "@langchain/core/tools";
import { SelfHealConfigError } from "../../errors.js";
import type { SelfHealing } from "../../index.js";
import {
  Invocation,
  passesToolError,
  passing,
  settled,
  toolCallIdOption,
  withSignal,
} from "./invocation.js";
import { checkHealToolOptions, checkInstance, type HealToolOptions } from "./options.js";
import { registeredTool } from "./registry.js";
import { HEALED, toolOptions } from "./tool-calls.js";

/**
 * The tools `healTool` made, with the instance they call: healing one of them again on that
 * instance returns it (a second copy would nest two selfheal calls for one invocation).
 */
const healedBy = new WeakMap<object, SelfHealing>();

/** The config a tool's `invoke` receives; ToolNode adds the call's id as `toolCallId`. */
type InvokeConfig = ToolRunnableConfig & { toolCallId?: string };

/**
 * A LangChain tool (`tool()`, a `StructuredTool`) whose `invoke` goes through selfheal: the same
 * object underneath (name, description, schema, prototype), each call a selfheal tool call.
 * Failures are thrown, as a tool throws; `createAgent` without middleware turns them into error
 * ToolMessages. Use it without `createAgent`, or for tools of an agent you do not build.
 */
export function healTool<T extends StructuredToolInterface>(
  sh: SelfHealing,
  tool: T,
  options: HealToolOptions,
): T {
  checkInstance(sh, "healTool(sh)");
  checkTool(tool);
  const field = `healTool(${tool.name})`;
  const { readOnly, spans, ...settings } = checkHealToolOptions(options, `${field}.options`);
  // Registered (or checked against the registration: read-only or a write) before anything else.
  const wrapped = registeredTool(sh, tool.name, toolOptions<unknown>(readOnly, settings, spans));
  if (healedBy.get(tool) === sh) return tool;
  const invoke = async (input: unknown, config?: InvokeConfig): Promise<unknown> => {
    const call = isToolCall(input) ? input : undefined;
    const invocation = new Invocation(call ? call.args : input, (ctx) =>
      passing(() => tool.invoke(input as never, withSignal(config, ctx.signal)), passesToolError),
    );
    const toolCallId = call?.id ?? config?.toolCall?.id ?? config?.toolCallId;
    const signal = config?.signal;
    return settled(
      await wrapped(invocation, {
        ...toolCallIdOption(toolCallId),
        ...(signal && { signal }),
      }),
    );
  };
  // Own properties over the tool as prototype: everything else is the tool's own.
  const healed = Object.assign(Object.create(tool) as T, { [HEALED]: true, invoke });
  healedBy.set(healed, sh);
  return healed;
}

/** A LangChain tool has a name and `invoke`: anything else is a mistake worth naming now. */
function checkTool(tool: unknown): void {
  const t = tool as Partial<StructuredToolInterface> | null | undefined;
  if (typeof t?.invoke !== "function" || typeof t.name !== "string" || t.name === "")
    throw new SelfHealConfigError(
      "healTool(tool)",
      "expected a LangChain tool (tool(), StructuredTool)",
    );
}

/** A model's tool call (LangChain's own test: `type: "tool_call"`). */
function isToolCall(input: unknown): input is ToolCall {
  return typeof input === "object" && input !== null && (input as ToolCall).type === "tool_call";
}
