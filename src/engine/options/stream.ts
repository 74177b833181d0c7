import { SelfHealConfigError } from "../../errors.js";
import { STREAM_MODES, type StreamMode } from "../../telemetry/conventions.js";
import type { CallContext } from "../call-context.js";
import type { ToolOptions } from "./tool.js";
import { ms, numbers, object, optionalChoice, optionalList, withMethods } from "./validate.js";

/** What one chunk of a stream says. Every field is optional: a chunk may say nothing. */
export interface ChunkInfo {
  /** The model is producing (text, reasoning, a tool call starting): the first ends the first-token wait. */
  readonly token?: boolean | undefined;
  /** It carries answer content (text, a tool call, a file): a stream with none is an empty answer. */
  readonly answer?: boolean | undefined;
  /** The stream's terminal signal: it completed with this finish reason. */
  readonly finishReason?: string | undefined;
  /** Output tokens the provider reported (usually on the last chunk). */
  readonly outputTokens?: number | undefined;
  /**
   * Input tokens the provider reported: the attempt's, the last count read (a provider that
   * repeats its running usage on every chunk counts once), reported when the attempt ends.
   */
  readonly inputTokens?: number | undefined;
  /**
   * The API's own end-of-stream event came (Anthropic's `message_stop`): with `completion:
   * "finish-and-end"`, a stream is complete only once it came after the finish reason.
   */
  readonly end?: boolean | undefined;
  /**
   * A failure the source reported in band (an SDK's error part). The stream goes on; if it then
   * does not complete, this is what failed it (thrown as is before the first token, as the
   * cause after it), so a provider's structured error is diagnosed as itself.
   */
  readonly error?: unknown;
}

/**
 * How to read a stream's chunks. `completion: "finish"`: complete only once a chunk carried a
 * finish reason, so a source that just ends was cut (SSE over HTTP, provider SDK streams).
 * `"finish-and-end"`: a finish reason, then the API's end event (`ChunkInfo.end`), so a stream
 * cut between the two is cut too (Anthropic's `message_delta` then `message_stop`). `"end"`: the
 * source ending is its completion (a source that throws when it is cut).
 */
export interface StreamFormat<C> {
  read(chunk: C): ChunkInfo | undefined;
  readonly completion: StreamCompletion;
  /**
   * The model that answered, as a chunk names it (`gen_ai.response.model`): asked of each chunk
   * until one names it (a non-empty string).
   */
  responseModel?(chunk: C): unknown;
}

/** What completes a stream (see StreamFormat). */
export type StreamCompletion = "finish" | "finish-and-end" | "end";
const COMPLETIONS: readonly StreamCompletion[] = ["finish", "finish-and-end", "end"];

const EVERY_CHUNK: ChunkInfo = Object.freeze({ token: true, answer: true });

/** The default format: every chunk is a token of the answer; the source ending completes it. */
export const PLAIN_CHUNKS: StreamFormat<unknown> = Object.freeze({
  read: () => EVERY_CHUNK,
  completion: "end" as const,
});

/** A stream of one attempt: what the stream function returns (or resolves to). */
export type StreamFunction<A, C> = (
  args: A,
  context: CallContext,
) => AsyncIterable<C> | Promise<AsyncIterable<C>>;

/** The options of `sh.tool` that a stream takes. */
export type StreamToolOptions<A> = Omit<ToolOptions<A, never>, "isEmpty" | "cannedAnswer">;

/**
 * Options of `sh.stream`: those of `sh.tool` (but `isEmpty` and `cannedAnswer`, which a stream
 * reads from its chunks), and the stream's limits. `timeoutMs`, when set, bounds each whole
 * attempt; by default an attempt is bounded by the limits below and the call's deadline.
 */
export interface StreamOptions<
  A,
  C,
  M extends StreamMode = StreamMode,
> extends StreamToolOptions<A> {
  /** How to read chunks (tokens, finish reason, usage). Default: every chunk a token, end completes. */
  format?: StreamFormat<C>;
  /** An attempt with no token this long after it started fails (STREAM_FIRST_TOKEN_TIMEOUT). */
  firstTokenMs?: number;
  /** An attempt silent this long after a chunk, once a token came, fails (STREAM_STALLED). */
  idleMs?: number;
  /**
   * What a failure after the first token does: `fail` (default) surfaces a
   * StreamInterruptedError saying how much was delivered; `restart` runs the whole answer again
   * (next route first) and yields a StreamRestart before it; `buffer` releases chunks only once
   * the stream is complete, so any failure is retried or failed over like a plain call.
   */
  afterFirstToken?: M;
  /** Finish reasons that mean the answer is incomplete (STREAM_TRUNCATED, or CONTENT_POLICY). */
  failOnFinish?: readonly string[];
}

/** Defaults of a stream's limits (README, "Streams"). */
export const STREAM_DEFAULTS = {
  /**
   * A hosted chat model's first token comes within a few seconds even under load; a reasoning
   * model may think for longer before its first visible token: raise it for those.
   */
  firstTokenMs: 20_000,
  /** Once an answer flows, chunks come every few to a few hundred ms. */
  idleMs: 15_000,
  afterFirstToken: "fail" as StreamMode,
  failOnFinish: Object.freeze(["length", "content_filter", "content-filter", "error"]),
};

/** A stream's options with the defaults filled in. */
export interface ResolvedStreamLimits<C> {
  readonly format: StreamFormat<C>;
  readonly firstTokenMs: number;
  readonly idleMs: number;
  readonly mode: StreamMode;
  readonly failOnFinish: ReadonlySet<string>;
}

const STREAM_KEYS = ["format", "firstTokenMs", "idleMs", "afterFirstToken", "failOnFinish"];
const LIMIT_RULES = { firstTokenMs: ms(1), idleMs: ms(1) };
const NOT_FOR_STREAMS: Readonly<Record<string, string>> = {
  isEmpty: "a stream's emptiness is read from its chunks: mark answer chunks in `format`",
  cannedAnswer: "a canned answer is not a stream; catch the error instead",
};

/**
 * Splits a stream's options into the tool's and the stream's own, validated: a bad one throws
 * SelfHealConfigError naming the field. The tool's are checked by sh.tool's validation.
 */
export function splitStreamOptions<A, C>(
  name: string,
  input: unknown,
): { tool: StreamToolOptions<A>; limits: ResolvedStreamLimits<C> } {
  const field = `stream("${name}").options`;
  const o = object(input, field);
  for (const [key, why] of Object.entries(NOT_FOR_STREAMS)) {
    if (o[key] !== undefined) throw new SelfHealConfigError(`${field}.${key}`, why);
  }
  const tool: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(o)) if (!STREAM_KEYS.includes(key)) tool[key] = value;
  numbers(o, LIMIT_RULES, field);
  optionalChoice(o.afterFirstToken, STREAM_MODES, `${field}.afterFirstToken`);
  if (o.format !== undefined) withMethods(o.format, `${field}.format`, ["read"]);
  const format = (o.format ?? PLAIN_CHUNKS) as StreamFormat<C>;
  const responseModel = (format as { responseModel?: unknown }).responseModel;
  if (responseModel !== undefined && typeof responseModel !== "function") {
    throw new SelfHealConfigError(`${field}.format.responseModel`, "expected a function");
  }
  const completion: unknown = format.completion;
  if (!COMPLETIONS.includes(completion as StreamCompletion)) {
    throw new SelfHealConfigError(
      `${field}.format.completion`,
      'expected "finish" (a finish reason completes the stream), "finish-and-end" (a finish reason, then the end event) or "end" (its end does)',
    );
  }
  const failOnFinish = optionalList(o.failOnFinish, `${field}.failOnFinish`, "finish reasons");
  if (failOnFinish.some((r) => typeof r !== "string"))
    throw new SelfHealConfigError(`${field}.failOnFinish`, "expected a list of finish reasons");
  return {
    tool: { kind: "llm", ...tool } as unknown as StreamToolOptions<A>,
    limits: {
      format,
      firstTokenMs: (o.firstTokenMs as number | undefined) ?? STREAM_DEFAULTS.firstTokenMs,
      idleMs: (o.idleMs as number | undefined) ?? STREAM_DEFAULTS.idleMs,
      mode: (o.afterFirstToken as StreamMode | undefined) ?? STREAM_DEFAULTS.afterFirstToken,
      failOnFinish: new Set(
        (o.failOnFinish as readonly string[] | undefined) ?? STREAM_DEFAULTS.failOnFinish,
      ),
    },
  };
}
