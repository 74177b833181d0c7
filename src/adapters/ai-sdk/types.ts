// The AI SDK's model and tool types as far as the adapter reads them, by shape. `ai` 6 speaks
// the v3 model specification (`@ai-sdk/provider` 3), `ai` 7 the v4 one (`@ai-sdk/provider` 4);
// both are structurally these types, so one code path serves both. Nothing here names `ai` or
// `@ai-sdk/provider`: either may be the installed one (and under strict installs, pnpm, the
// provider package is only a dependency of `ai`, which selfheal's declarations cannot resolve).

/** The model specifications the adapter heals: `v3` (AI SDK 6), `v4` (AI SDK 7). */
export type SpecificationVersion = "v3" | "v4";

/**
 * What `doGenerate` and `doStream` receive, as far as the adapter reads it: the prompt (shown by
 * `recordArguments`), the abort signal (replaced by selfheal's for each attempt), and whether
 * the caller asked for raw chunks. The rest (settings, tools, provider options) is passed on.
 */
export interface ModelCallOptions {
  readonly prompt: unknown;
  readonly abortSignal?: AbortSignal | undefined;
  readonly includeRawChunks?: boolean | undefined;
}

/** Token counts of a call (v3 and v4 alike): totals, undefined when the provider sent none. */
export interface Usage {
  readonly inputTokens: { readonly total: number | undefined };
  readonly outputTokens: { readonly total: number | undefined };
}

/**
 * A unified finish reason (`stop`, `length`, `content-filter`, `tool-calls`, `error`, `other`,
 * and since v4 `interrupted`) with the provider's raw one.
 */
export interface FinishReason {
  readonly unified: string;
  readonly raw: string | undefined;
}

/** A content part of a generate result: `text` carries `text`; the others are told by `type`. */
export interface ContentPart {
  readonly type: string;
  readonly text?: string;
}

export interface GenerateResult {
  readonly content: readonly ContentPart[];
  readonly finishReason: FinishReason;
  readonly usage: Usage;
  readonly response?: { readonly modelId?: string | undefined } | undefined;
}

/**
 * A stream part. The adapter reads the ones below; every other part (`stream-start`,
 * `text-start`, `response-metadata`, `source`, v4's `ping`, `custom`, ...) only has a `type`.
 */
export type StreamPart =
  | { readonly type: "text-delta" | "reasoning-delta" | "tool-input-delta"; readonly delta: string }
  | { readonly type: "finish"; readonly finishReason: FinishReason; readonly usage: Usage }
  | { readonly type: "error"; readonly error: unknown }
  | { readonly type: "raw"; readonly rawValue: unknown }
  | { readonly type: string };

export interface StreamResult {
  readonly stream: ReadableStream<StreamPart>;
  readonly request?: unknown;
  readonly response?: unknown;
}

/**
 * An AI SDK language model of specification `v3` (AI SDK 6 providers, `ai` 6 and 7) or `v4`
 * (AI SDK 7 providers), by shape. Models of AI SDK 5 (`v2`) are not accepted.
 */
export interface LanguageModel {
  readonly specificationVersion: SpecificationVersion;
  readonly provider: string;
  readonly modelId: string;
  readonly supportedUrls: PromiseLike<Record<string, RegExp[]>> | Record<string, RegExp[]>;
  doGenerate(options: ModelCallOptions): PromiseLike<GenerateResult>;
  doStream(options: ModelCallOptions): PromiseLike<StreamResult>;
}

/** `LanguageModel`, under the name it had when only AI SDK 6 was supported (v4 models fit too). */
export type LanguageModelV3 = LanguageModel;

/**
 * The model `healModel` returns: the members of the model's own type that the AI SDK calls (its
 * specification, provider, id, URLs, `doGenerate`, `doStream`), so it is a model of the same SDK.
 */
export type HealedModel<M extends LanguageModel> = Pick<
  M,
  "specificationVersion" | "provider" | "modelId" | "supportedUrls" | "doGenerate" | "doStream"
>;

/**
 * `selfHealMiddleware`'s middleware, for `wrapLanguageModel` of `ai` 6 and 7 alike: its wrappers
 * answer with the wrapped model's own result type (inferred from the SDK's `doGenerate` /
 * `doStream`), so it fits each SDK's LanguageModelMiddleware. `ai` 7 accepts a middleware
 * labelled `v3` (it does not read the label).
 */
export interface SelfHealMiddleware {
  readonly specificationVersion: "v3";
  wrapGenerate<R>(options: {
    doGenerate: () => PromiseLike<R>;
    params: ModelCallOptions;
    model: LanguageModel;
  }): PromiseLike<R>;
  wrapStream<R>(options: {
    doStream: () => PromiseLike<R>;
    params: ModelCallOptions;
    model: LanguageModel;
  }): PromiseLike<R>;
}

/** The options an AI SDK tool's `execute` receives (`ai` 6 and 7), as far as the adapter reads them. */
export interface ToolCallOptions {
  readonly toolCallId: string;
  readonly abortSignal?: AbortSignal | undefined;
}

/** An AI SDK tool, by shape: a tool without `execute` (client-side) is passed through as it is. */
export interface Tool {
  readonly execute?: ((input: never, options: never) => unknown) | undefined;
}

/** An AI SDK ToolSet (`ai` 6 or 7), by shape. */
export type ToolSet = Readonly<Record<string, Tool>>;
