import type { FunctionTool, RunContext, ToolInputParameters, getCurrentSpan } from "@openai/agents";
import { isHttpResponseError, isSelfHealError, isToolTimeoutError } from "../../index.js";
import type { HealToolOptions, ToolCallDetails } from "./options.js";

// How a healed tool's failures reach the model: the SDK's tool() turns a thrown error into the
// tool's output text (its errorFunction); a healed tool does the same with what recovery could
// not fix.

/** The SDK span current when a healed tool was called, if tracing is on. */
type SdkSpan = ReturnType<typeof getCurrentSpan>;

/**
 * The output the SDK's `tool()` gives for any failure while the tool keeps its default
 * `errorFunction` (`defaultToolErrorFunction` in @openai/agents-core 0.20, not exported): the
 * error itself never leaves the tool. Matched verbatim; the tests pin it to the installed SDK.
 */
export const SDK_DEFAULT_TOOL_ERROR = "An error occurred while running the tool. Please try again.";

/**
 * A healed tool failed, but the SDK had already turned its error into text (the tool keeps its
 * default `errorFunction`): selfheal counts the failure and may retry a read once (UNKNOWN), but
 * cannot tell a 429 from a bug. Create the tool with `errorFunction: null` to fix that.
 */
export class HiddenToolError extends Error {
  override readonly name = "HiddenToolError";
  constructor(readonly tool: string) {
    super(
      `tool "${tool}" failed and the Agents SDK's default errorFunction turned the error into text before selfheal could see it; create the tool with errorFunction: null so selfheal can diagnose and recover it`,
    );
  }
}

/**
 * The model's arguments do not match the tool's schema (the SDK's `ModelBehaviorError`, raised
 * inside the healed copy: the runner only checks that they parse). The same arguments fail the
 * same way, so it is BAD_REQUEST (code `INVALID_ARGUMENT`), never retried.
 */
export class ToolInputRejectedError extends Error {
  override readonly name = "ToolInputRejectedError";
  readonly code = "INVALID_ARGUMENT";
  constructor(
    readonly tool: string,
    options: { cause: unknown },
  ) {
    super(`the model's arguments for tool "${tool}" do not match its schema`, options);
  }
}

/** What the runner tells the model about arguments it cannot parse (the SDK's own text). */
const SDK_INVALID_INPUT_MESSAGE =
  "An error occurred while parsing tool arguments. Please try again with valid JSON.";

/**
 * What the model reads when recovery gives up and no `errorFunction` is set: selfheal's own
 * words for its refusals (they say whether anything was sent), the SDK's text for arguments
 * that fail the schema, the error's type otherwise (never its text, which may carry data the
 * model should not see).
 */
export function defaultToolErrorMessage(toolName: string, error: unknown): string {
  if (isSelfHealError(error) && !isHttpResponseError(error)) return error.message;
  if (error instanceof ToolInputRejectedError) return SDK_INVALID_INPUT_MESSAGE;
  return `Tool "${toolName}" failed (${errorType(error)}) and could not be recovered now. Continue without it or try again later.`;
}

/**
 * The tool's output for a call recovery could not save. A cancelled run, a structured tool and
 * a `raise_exception` timeout fail as they would without selfheal; anything else becomes text.
 */
export function failureOutput<C, P extends ToolInputParameters, R>(
  tool: FunctionTool<C, P, R>,
  o: HealToolOptions,
  call: { runContext: RunContext<C>; details: ToolCallDetails; span: SdkSpan },
  error: unknown,
): unknown {
  if (call.details?.signal?.aborted) throw error;
  // The SDK already marked its span and chose the text.
  if (error instanceof HiddenToolError) return SDK_DEFAULT_TOOL_ERROR;
  // As the SDK's tool() marks a failure it turns into text; the type only, never the message.
  call.span?.setError({
    message: "Error running tool (non-fatal)",
    data: { tool_name: tool.name, error: errorType(error) },
  });
  if (o.errorFunction) {
    return o.errorFunction(call.runContext, error, call.details);
  }
  // A text would break a structured tool's output schema.
  if (tool.outputSchema !== undefined) throw error;
  if (tool.timeoutBehavior === "raise_exception" && isToolTimeoutError(error)) throw error;
  return defaultToolErrorMessage(tool.name, error);
}

function errorType(error: unknown): string {
  if (isHttpResponseError(error)) return `HTTP ${error.status}`;
  if (error instanceof Error) return error.name;
  return typeof error;
}
