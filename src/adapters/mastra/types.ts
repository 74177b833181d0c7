// Mastra's tool types as far as the adapter reads them, by shape. Nothing here names
// `@mastra/core`: selfheal builds and loads without it, and a user's own Tool types pass through
// `healTools` unchanged (the set it returns is of the type it was given).

/**
 * What a tool's `execute` receives as its second argument inside a Mastra agent, as far as the
 * adapter reads it. A Mastra tool (`createTool`) gets a ToolExecutionContext: the abort signal on
 * `abortSignal`, the model's call id on `agent.toolCallId`. An AI SDK tool handed to a Mastra
 * agent gets the SDK's options: `abortSignal` and `toolCallId`. Everything else (request context,
 * writer, suspend, workspace, tracing) is passed on to the tool untouched.
 */
export interface ToolContext {
  readonly abortSignal?: AbortSignal | undefined;
  readonly toolCallId?: string | undefined;
  readonly agent?: { readonly toolCallId?: string | undefined } | undefined;
}

/**
 * A tool of a Mastra agent's `tools`, by shape: a Mastra tool (`createTool`, `new Tool`), an AI
 * SDK tool, or a tool without `execute` (provider-executed, client-side), passed through as it is.
 */
export interface Tool {
  readonly execute?: ((input: never, context: never) => unknown) | undefined;
}

/** A Mastra agent's `tools` record (ToolsInput of @mastra/core), by shape. */
export type ToolsInput = Readonly<Record<string, Tool>>;
