import { ToolInputParsingException } from "@langchain/core/tools";
import { ToolInvocationError } from "langchain";
import type { CallContext } from "../../index.js";

/**
 * What an attempt handed back instead of throwing: an error that is not the tool's or the
 * model's failure (LangGraph's interrupts, arguments the model got wrong). selfheal must neither
 * diagnose nor retry it, so it travels as a value and is thrown again after the call.
 */
export class PassedThrough {
  constructor(readonly error: unknown) {}
}

export type Outcome<R> = R | PassedThrough;

/**
 * One LangChain call as selfheal sees it: its arguments (what spans record with
 * `recordArguments`, and what `idempotencyKey` reads) and how to run one attempt of it.
 */
export class Invocation<R> {
  constructor(
    readonly args: unknown,
    readonly attempt: (ctx: CallContext) => Promise<Outcome<R>>,
  ) {}

  toJSON(): unknown {
    return this.args;
  }
}

/** The function every adapter-made selfheal tool runs: one attempt of the invocation. */
export function runAttempt<R>(invocation: Invocation<R>, ctx: CallContext): Promise<Outcome<R>> {
  return invocation.attempt(ctx);
}

/** Runs `fn`; errors `passes` picks come back as a `PassedThrough` value, the rest are thrown. */
export async function passing<R>(
  fn: () => Promise<R>,
  passes: (error: unknown) => boolean,
): Promise<Outcome<R>> {
  try {
    return await fn();
  } catch (error) {
    if (passes(error)) return new PassedThrough(error);
    throw error;
  }
}

/** The call's value, or the passed-through error thrown again. */
export function settled<R>(outcome: Outcome<R>): R {
  if (outcome instanceof PassedThrough) throw outcome.error;
  return outcome;
}

/**
 * LangGraph control flow (`interrupt()`, `Command` to a parent graph): `is_bubble_up`, the test
 * LangGraph itself uses, read without importing LangGraph (a dependency of langchain, not ours).
 */
export function isControlFlow(error: unknown): boolean {
  try {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as { is_bubble_up?: unknown }).is_bubble_up === true
    );
  } catch {
    return false; // a hostile getter: not LangGraph's
  }
}

/**
 * Arguments the model got wrong: LangChain hands them back to the model to correct. Not the
 * tool's failure, and the same arguments would fail the same way on a retry.
 */
export function isModelMistake(error: unknown): boolean {
  return ToolInvocationError.isInstance(error) || error instanceof ToolInputParsingException;
}

/** What a tool attempt passes through: control flow and the model's argument mistakes. */
export const passesToolError = (error: unknown): boolean =>
  isControlFlow(error) || isModelMistake(error);

/**
 * `config` with selfheal's attempt signal joined to its own, so a timeout or a caller's abort
 * reaches the tool (LangChain merges signals the same way, with `AbortSignal.any`).
 */
export function withSignal<C extends { signal?: AbortSignal | undefined }>(
  config: C | undefined,
  signal: AbortSignal,
): C & { signal: AbortSignal } {
  const own = config?.signal;
  return {
    ...(config as C),
    signal: own === undefined || own === signal ? signal : AbortSignal.any([own, signal]),
  };
}

/**
 * The model's tool call id as a selfheal call option: left out when blank (a provider that sends
 * none, or ""), which selfheal would reject as a bad option before the tool ran.
 */
export function toolCallIdOption(id: unknown): { toolCallId?: string } {
  return typeof id === "string" && id.trim() !== "" ? { toolCallId: id } : {};
}
