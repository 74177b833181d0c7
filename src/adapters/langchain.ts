/**
 * `selfheal/langchain`: one line to heal a LangChain 1.x agent's tool and model calls.
 *
 * ```ts
 * const agent = createAgent({ model, tools, middleware: [selfHealingMiddleware(sh, { readOnly: ["search"] })] });
 * ```
 *
 * Each tool call becomes a call of a selfheal tool of the same name, each model call a call of
 * one `llm` tool (`model`): spans, health, diagnosis, recovery, read-only mode. Tools not
 * declared read-only are writes, refused while the agent is critical. A model call that streams
 * (`agent.stream` with streamMode `messages`, `streamEvents`) is bounded by its time to first
 * token and idle gaps and checked for completion; `model.afterFirstToken` says what a failure
 * after its first token does. `healChatModelStream` heals a chat model's own `stream()`.
 */
import { createMiddleware, type AgentMiddleware } from "langchain";
import type { SelfHealing } from "../index.js";
import { ModelCalls } from "./langchain/model-calls.js";
import {
  checkInstance,
  checkMiddlewareOptions,
  readOnlyTest,
  type SelfHealingMiddlewareOptions,
} from "./langchain/options.js";
import { ToolCalls, toolOptions, type ToolAnswer } from "./langchain/tool-calls.js";

export { healTool } from "./langchain/plain-tool.js";
export {
  DEFAULT_STREAM_NAME,
  healChatModelStream,
  type ChatModelStreamCallOptions,
  type HealedChatModelStream,
} from "./langchain/chat-model-stream.js";
export {
  isModelStreamRestart,
  STREAM_RESTART_EVENT,
  type ModelStreamRestart,
} from "./langchain/stream-restart.js";
export type { StreamCompletion } from "./langchain/stream-format.js";
export type {
  HealChatModelStreamOptions,
  HealToolOptions,
  LangChainFallback,
  LangChainModelOptions,
  LangChainStreamSettings,
  LangChainToolSettings,
  ModelRouteSettings,
  OnToolFailure,
  SelfHealingMiddlewareOptions,
  ToolArgs,
} from "./langchain/options.js";

/** The middleware's name in LangChain (its errors are wrapped under it). */
const MIDDLEWARE_NAME = "selfHealingMiddleware";

/**
 * A `createAgent` middleware that sends every tool call and model call through `sh`. Put it
 * last in `middleware` (innermost): it then sees each tool's and model's own failures, and
 * middleware before it sees selfheal's outcome.
 *
 * A tool call selfheal could not heal (a refused write, an escalation, the tool's error after
 * recovery) becomes an error ToolMessage by default (`onFailure`), as LangChain shows tool
 * errors to the model; a model call that fails is thrown, and `agent.invoke` rejects with
 * LangChain's `MiddlewareError` whose `cause` is selfheal's error (a StreamInterruptedError when
 * part of a streamed answer had reached the caller). Under `afterFirstToken: "restart"` the
 * discard signal (`ModelStreamRestart`) precedes a new answer: a `custom` chunk of `agent.stream`
 * (include `custom` in `streamMode`) and an `on_custom_event` of `streamEvents`.
 */
export function selfHealingMiddleware(
  sh: SelfHealing,
  options: SelfHealingMiddlewareOptions = {},
): AgentMiddleware {
  checkInstance(sh, `${MIDDLEWARE_NAME}(sh)`);
  const o = checkMiddlewareOptions(options, `${MIDDLEWARE_NAME}.options`);
  const isReadOnly = readOnlyTest(o.readOnly);
  const tools = new ToolCalls(
    sh,
    (name) => toolOptions<ToolAnswer>(isReadOnly(name), o.tools?.[name], o.spans),
    o.onFailure ?? "continue",
  );
  // Tools with settings, and the model tool, are registered now: a bad setting fails here.
  for (const name of Object.keys(o.tools ?? {})) tools.register(name);
  const models = o.model === false ? undefined : new ModelCalls(sh, o.model ?? {});
  return createMiddleware({
    name: MIDDLEWARE_NAME,
    wrapToolCall: (request, handler) => tools.wrap(request, handler),
    ...(models && {
      wrapModelCall: (request, handler) => models.wrap(request, handler),
    }),
  });
}
