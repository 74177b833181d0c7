/**
 * `selfheal/openai-agents`: heals the tools of agents built on the OpenAI Agents SDK
 * (`@openai/agents`) and feeds selfheal's health from the SDK's own traces.
 *
 * ```ts
 * const agent = new Agent({ name, model, tools: healTools(sh, [search, refund], { readOnly: ["search"] }) });
 * addTraceProcessor(healthTraceProcessor(sh)); // tools left unhealed and model calls count too
 * ```
 *
 * Tools should be created with `errorFunction: null`: the SDK's default error function turns a
 * tool's error into text inside the tool, before selfheal could diagnose it (429, timeout, ...).
 * @see https://openai.github.io/openai-agents-js/guides/tools/
 */
export { healTool, healTools } from "./openai-agents/heal-tool.js";
export {
  defaultToolErrorMessage,
  HiddenToolError,
  SDK_DEFAULT_TOOL_ERROR,
  ToolInputRejectedError,
} from "./openai-agents/tool-output.js";
export type { HealToolOptions, ReadOnlySpec, ToolCallDetails } from "./openai-agents/options.js";
export { healthTraceProcessor } from "./openai-agents/trace-processor.js";
export type { HealthTraceProcessorOptions } from "./openai-agents/trace-processor.js";
