/**
 * `selfheal/mastra`: heals the tools and model calls of agents built on Mastra (`@mastra/core`
 * 1.x), through the two things a Mastra Agent is given.
 *
 * ```ts
 * const agent = new Agent({
 *   id: "support", name: "Support", instructions,
 *   model: healModel(sh, openai("gpt-4o"), { fallback: anthropic("claude-sonnet-4-5") }),
 *   tools: healTools(sh, { searchDocs, issueRefund }, { readOnly: ["searchDocs"] }),
 * });
 * ```
 *
 * - `tools`: `healTools` makes each tool's `execute` a selfheal call; what recovery cannot fix
 *   is thrown, and Mastra hands its message to the model as the tool's error result.
 * - `model`: Mastra runs AI SDK language models (`v3`, AI SDK 6 providers; `v4`, AI SDK 7) as
 *   they are, so `healModel` is selfheal/ai-sdk's, re-exported: the same healed model. Keep the
 *   Agent's `maxRetries` at its default 0 (selfheal retries; Mastra's retries would run around
 *   it). A model string (`"openai/gpt-4o"`, Mastra's model router) is not healed: pass a provider
 *   model object.
 *
 * Nothing here imports `@mastra/core` at run time.
 * @see https://mastra.ai/reference/tools/create-tool
 */
export { healTools, callContextOf } from "./mastra/tools.js";
export type { HealToolsOptions, MastraToolOptions } from "./mastra/options.js";
export type { Tool, ToolContext, ToolsInput } from "./mastra/types.js";
export { healModel } from "./ai-sdk/model.js";
export type { HealModelOptions, ModelRoute } from "./ai-sdk/options.js";
export type { HealedModel, LanguageModel } from "./ai-sdk/types.js";
