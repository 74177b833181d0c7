// The AI SDK's model types, read off the `ai` package itself. `@ai-sdk/provider` declares them,
// but it is only a dependency of `ai`: under strict installs (pnpm) selfheal's type declarations
// could not resolve it, so nothing here names it.
import type { wrapLanguageModel } from "ai";

/**
 * A language model of the AI SDK 6 specification (`specificationVersion: "v3"`). The v2 models of
 * AI SDK 5 provider packages are not accepted (`ai` 6 adapts them internally, without an export).
 */
export type LanguageModelV3 = Parameters<typeof wrapLanguageModel>[0]["model"];
/** What `doGenerate` and `doStream` receive: the prompt, settings, tools and abort signal. */
export type ModelCallOptions = Parameters<LanguageModelV3["doGenerate"]>[0];
export type GenerateResult = Awaited<ReturnType<LanguageModelV3["doGenerate"]>>;
export type StreamResult = Awaited<ReturnType<LanguageModelV3["doStream"]>>;
export type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;
export type ContentPart = GenerateResult["content"][number];
