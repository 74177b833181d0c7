/**
 * `selfheal/ai-sdk`: heals the tools and model calls of agents built on the Vercel AI SDK
 * (`ai` 6 or 7). `healTools(sh, tools, { readOnly })` turns each tool's `execute` into a selfheal
 * call; `healModel(sh, model, { fallback })` makes each model call one, with empty-answer
 * detection and failover. Models of specification `v3` (AI SDK 6 providers) and `v4` (AI SDK 7
 * providers) are healed alike; nothing here imports `ai` at run time. For health from the SDK's
 * own telemetry alone, add `sh.spanProcessor()` to the tracer provider and turn on its telemetry.
 */
export { healTools, callContextOf } from "./ai-sdk/tools.js";
export { healModel, selfHealMiddleware } from "./ai-sdk/model.js";
export { isRestartPart, type RestartRawValue } from "./ai-sdk/stream.js";
export type {
  AiSdkToolOptions,
  HealModelOptions,
  HealToolsOptions,
  ModelRoute,
} from "./ai-sdk/options.js";
export type {
  HealedModel,
  LanguageModel,
  LanguageModelV3,
  SelfHealMiddleware,
  SpecificationVersion,
  Tool,
  ToolCallOptions,
  ToolSet,
} from "./ai-sdk/types.js";
