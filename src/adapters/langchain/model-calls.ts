import { AIMessage, type UsageMetadata } from "@langchain/core/messages";
import type { ChatGenerationChunk } from "@langchain/core/outputs";
import type { WrapModelCallHandler } from "langchain";
import type { ResolvedStreamLimits } from "../../engine/options/stream.js";
import type { CallContext, SelfHealing, ToolOptions, WrappedTool } from "../../index.js";
import { Invocation, isControlFlow, passing, settled, type Outcome } from "./invocation.js";
import { ModelRoutes, routeOptions } from "./model-routes.js";
import { ModelStream, streamLimits, type AttemptTap } from "./model-stream.js";
import type { LangChainModelOptions } from "./options.js";
import { registeredTool } from "./registry.js";
import { generationChunkFormat } from "./stream-format.js";
import { tappedModel } from "./tapped-model.js";

/** What a model call answers: an AIMessage (or LangChain's own structured-output record). */
export type ModelAnswer = Awaited<ReturnType<WrapModelCallHandler>>;
type HandlerRequest = Parameters<WrapModelCallHandler>[0];

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
  private readonly routes: ModelRoutes;
  private readonly name: string;
  private readonly limits: ResolvedStreamLimits<ChatGenerationChunk>;

  constructor(sh: SelfHealing, options: LangChainModelOptions) {
    this.routes = new ModelRoutes(options.provider, options.fallbacks);
    this.name = options.name ?? DEFAULT_MODEL_TOOL;
    this.tool = registeredTool(sh, this.name, modelToolOptions(options));
    this.limits = streamLimits(options, generationChunkFormat(options.completion ?? "finish"));
  }

  async wrap(request: HandlerRequest, handler: WrapModelCallHandler): Promise<ModelAnswer> {
    const stream = new ModelStream(this.name, this.limits, request.runtime.writer);
    const invocation = new Invocation(
      { messages: request.messages.length, tools: request.tools.length },
      (ctx) => passing(() => this.attempt(request, handler, ctx, stream.tap(ctx)), isControlFlow),
    );
    const signal = request.runtime.signal;
    try {
      return settled(await this.tool(invocation, signal ? { signal } : undefined));
    } catch (error) {
      throw isControlFlow(error) ? error : stream.failure(error, signal?.aborted === true);
    }
  }

  private async attempt(
    request: HandlerRequest,
    handler: WrapModelCallHandler,
    ctx: CallContext,
    tap: AttemptTap,
  ): Promise<ModelAnswer> {
    const model = await this.routes.modelFor(ctx.provider, request.model);
    const answer = await handler({
      ...request,
      // The model's streams are read through the tap, its requests follow the attempt's signal.
      model: tappedModel(model, tap),
      // As LangChain's modelRetryMiddleware does: the client's own retries would hide each
      // failure from the diagnosis (and retry a 401 or a spent quota blindly on some clients).
      modelSettings: { maxRetries: 0, ...request.modelSettings },
    });
    tap.verify(answer);
    reportUsage(answer, ctx);
    return answer;
  }
}

function modelToolOptions(
  options: LangChainModelOptions,
): ToolOptions<Invocation<ModelAnswer>, Outcome<ModelAnswer>> {
  return { ...routeOptions(options), kind: "llm", isEmpty: isEmptyModelAnswer };
}

/** Tokens the answer reports, for the span and the recovery budget. */
function reportUsage(answer: unknown, ctx: CallContext): void {
  // Read as the plain field it is: on AIMessage its generic type resolves to undefined.
  const usage = (answer as { usage_metadata?: UsageMetadata } | null)?.usage_metadata;
  if (!AIMessage.isInstance(answer) || !usage) return;
  ctx.reportUsage({ inputTokens: usage.input_tokens, outputTokens: usage.output_tokens });
}
