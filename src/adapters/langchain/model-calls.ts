import { AIMessage, type UsageMetadata } from "@langchain/core/messages";
import { initChatModel, type ModelRequest, type WrapModelCallHandler } from "langchain";
import type { CallContext, SelfHealing, ToolOptions, WrappedTool } from "../../index.js";
import { Invocation, isControlFlow, passing, settled, type Outcome } from "./invocation.js";
import type { LangChainModelOptions } from "./options.js";
import { registeredTool } from "./registry.js";

/** What a model call answers: an AIMessage (or LangChain's own structured-output record). */
export type ModelAnswer = Awaited<ReturnType<WrapModelCallHandler>>;
type HandlerRequest = Parameters<WrapModelCallHandler>[0];
type Model = ModelRequest["model"];

/** The selfheal tool name of model calls unless `model.name` says otherwise. */
export const DEFAULT_MODEL_TOOL = "model";

/** Content blocks that carry no answer for the user on their own. */
const SILENT_BLOCKS = new Set(["reasoning", "thinking", "redacted_thinking"]);

/**
 * Whether a model answered nothing: an AIMessage with no tool call (valid or not) and no content
 * but blank text and reasoning. Anything else (structured output, a Command) is an answer.
 */
export function isEmptyModelAnswer(answer: unknown): boolean {
  if (!AIMessage.isInstance(answer)) return false;
  if ((answer.tool_calls?.length ?? 0) > 0 || (answer.invalid_tool_calls?.length ?? 0) > 0)
    return false;
  const { content } = answer;
  if (typeof content === "string") return content.trim() === "";
  return content.every(isSilentBlock);
}

function isSilentBlock(block: unknown): boolean {
  if (typeof block === "string") return block.trim() === "";
  const b = block as { type?: unknown; text?: unknown };
  if (b.type === "text") return typeof b.text !== "string" || b.text.trim() === "";
  return typeof b.type === "string" && SILENT_BLOCKS.has(b.type);
}

/** The middleware's model side: each model call through one selfheal `llm` tool. */
export class ModelCalls {
  private readonly tool: WrappedTool<Invocation<ModelAnswer>, Outcome<ModelAnswer>>;
  private readonly fallbacks = new Map<string, Model | string>();
  private readonly resolved = new Map<string, Promise<Model>>();
  private readonly primary: string | undefined;

  constructor(sh: SelfHealing, options: LangChainModelOptions) {
    this.primary = options.provider;
    for (const f of options.fallbacks ?? []) this.fallbacks.set(f.provider, f.model);
    this.tool = registeredTool(sh, options.name ?? DEFAULT_MODEL_TOOL, modelToolOptions(options));
  }

  async wrap(request: HandlerRequest, handler: WrapModelCallHandler): Promise<ModelAnswer> {
    const invocation = new Invocation(
      { messages: request.messages.length, tools: request.tools.length },
      (ctx) => passing(() => this.attempt(request, handler, ctx), isControlFlow),
    );
    const signal = request.runtime.signal;
    return settled(await this.tool(invocation, signal ? { signal } : undefined));
  }

  private async attempt(
    request: HandlerRequest,
    handler: WrapModelCallHandler,
    ctx: CallContext,
  ): Promise<ModelAnswer> {
    const answer = await handler({
      ...request,
      model: await this.modelFor(ctx.provider, request.model),
      // As LangChain's modelRetryMiddleware does: the client's own retries would hide each
      // failure from the diagnosis (and retry a 401 or a spent quota blindly on some clients).
      modelSettings: { maxRetries: 0, ...request.modelSettings },
    });
    reportUsage(answer, ctx);
    return answer;
  }

  /** The model of a route: the agent's own on the primary, else that provider's fallback. */
  private async modelFor(provider: string | undefined, own: Model): Promise<Model> {
    const fallback = provider === this.primary ? undefined : this.fallbacks.get(provider ?? "");
    if (fallback === undefined) return own;
    if (typeof fallback !== "string") return fallback;
    let model = this.resolved.get(fallback);
    if (!model) {
      // Made once, on first use: a string names a model for initChatModel, as in modelFallbackMiddleware.
      model = initChatModel(fallback) as Promise<Model>;
      this.resolved.set(fallback, model);
    }
    return model;
  }
}

function modelToolOptions(
  options: LangChainModelOptions,
): ToolOptions<Invocation<ModelAnswer>, Outcome<ModelAnswer>> {
  const { fallbacks, provider, timeoutMs, deadlineMs, plans } = options;
  const providers =
    provider !== undefined && fallbacks?.length
      ? [provider, ...fallbacks.map((f) => f.provider)]
      : undefined;
  return {
    readOnly: true, // a model call writes nothing; the tools it asks for are guarded themselves
    kind: "llm",
    isEmpty: isEmptyModelAnswer,
    ...(provider !== undefined && { provider }),
    ...(providers && { providers }),
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(deadlineMs !== undefined && { deadlineMs }),
    ...(plans !== undefined && { plans }),
  };
}

/** Tokens the answer reports, for the span and the recovery budget. */
function reportUsage(answer: unknown, ctx: CallContext): void {
  // Read as the plain field it is: on AIMessage its generic type resolves to undefined.
  const usage = (answer as { usage_metadata?: UsageMetadata } | null)?.usage_metadata;
  if (!AIMessage.isInstance(answer) || !usage) return;
  ctx.reportUsage({ inputTokens: usage.input_tokens, outputTokens: usage.output_tokens });
}
