/**
 * `responseEvents`, the stream format of OpenAI Responses events, on the events the API sends:
 * answer tokens, progress, the finish that completes a stream and those that fail it, in-band
 * failures diagnosed as the provider's; and what makes a plain response empty.
 */
import { describe, expect, it } from "vitest";
import { responseEvents, RESPONSES_FAIL_ON_FINISH } from "../../src/clients/openai.js";
import { isEmptyResponsesAnswer, type ResponseEvent } from "../../src/clients/openai-responses.js";
import { virtualInstance } from "../helpers/engine.js";

const read = (event: ResponseEvent) => responseEvents.read(event);
const ANSWER = { token: true, answer: true };
const PROGRESS = { token: true };

describe("responseEvents", () => {
  it("reads text, refusals and tool calls as answer tokens, reasoning as progress", () => {
    expect(responseEvents.completion).toBe("finish");
    expect(read({ type: "response.created", response: { status: "in_progress" } })).toBeUndefined();
    expect(read({ type: "response.output_text.delta", delta: "Hi" })).toEqual(ANSWER);
    expect(read({ type: "response.output_text.delta", delta: "  " })).toEqual(PROGRESS);
    expect(read({ type: "response.refusal.delta", delta: "No." })).toEqual(ANSWER);
    expect(read({ type: "response.function_call_arguments.delta", delta: "{" })).toEqual(ANSWER);
    expect(read({ type: "response.custom_tool_call_input.delta", delta: "x" })).toEqual(ANSWER);
    expect(read({ type: "response.output_item.added", item: { type: "function_call" } })).toEqual(
      ANSWER,
    );
    expect(read({ type: "response.output_item.added", item: { type: "web_search_call" } })).toEqual(
      ANSWER,
    );
    expect(read({ type: "response.output_item.added", item: { type: "message" } })).toBeUndefined();
    expect(
      read({ type: "response.output_item.added", item: { type: "reasoning" } }),
    ).toBeUndefined();
    expect(read({ type: "response.reasoning_summary_text.delta", delta: "hmm" })).toEqual(PROGRESS);
    expect(read({ type: "response.reasoning_text.delta", delta: "hmm" })).toEqual(PROGRESS);
  });

  it("completes on response.completed; response.incomplete finishes with its reason", () => {
    expect(
      read({
        type: "response.completed",
        response: { status: "completed", usage: { input_tokens: 3, output_tokens: 7 } },
      }),
    ).toEqual({ finishReason: "completed", outputTokens: 7, inputTokens: 3 });
    expect(
      read({
        type: "response.incomplete",
        response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } },
      }),
    ).toEqual({ finishReason: "max_output_tokens" });
    expect(read({ type: "response.incomplete", response: { status: "incomplete" } })).toEqual({
      finishReason: "incomplete",
    });
    expect(RESPONSES_FAIL_ON_FINISH).toEqual([
      "max_output_tokens",
      "max_messages",
      "content_filter",
    ]);
  });

  it("reports response.failed and error events as the provider's failure, diagnosed by code", async () => {
    const failed = read({
      type: "response.failed",
      response: { status: "failed", error: { code: "rate_limit_exceeded", message: "slow down" } },
    });
    expect(failed?.error).toMatchObject({ message: "slow down", code: "rate_limit_exceeded" });
    const error = read({ type: "error", code: "server_error", message: "boom" });
    expect(error?.error).toMatchObject({ name: "ResponseStreamError", code: "server_error" });
    expect(read({ type: "error" })?.error).toMatchObject({ message: "streamed error event" });
    const { sh } = virtualInstance();
    expect((await sh.diagnose(failed?.error)).pattern).toBe("RATE_LIMIT");
  });
});

describe("isEmptyResponsesAnswer", () => {
  const message = (text: string) => ({
    type: "message",
    content: [{ type: "output_text", text }],
  });

  it("is empty without an output item that answers", () => {
    expect(isEmptyResponsesAnswer({ output: [] })).toBe(true);
    expect(isEmptyResponsesAnswer({})).toBe(true);
    expect(isEmptyResponsesAnswer(null)).toBe(true);
    expect(isEmptyResponsesAnswer({ output: [message("  ")] })).toBe(true);
    expect(isEmptyResponsesAnswer({ output: [{ type: "reasoning" }, message("")] })).toBe(true);
  });

  it("answers with text, a refusal, or any tool call", () => {
    expect(isEmptyResponsesAnswer({ output: [message("Hi")] })).toBe(false);
    expect(
      isEmptyResponsesAnswer({ output: [{ type: "message", content: [{ type: "refusal" }] }] }),
    ).toBe(false);
    expect(isEmptyResponsesAnswer({ output: [{ type: "function_call" }] })).toBe(false);
    expect(isEmptyResponsesAnswer({ output: [{ type: "a_new_item" }] })).toBe(false);
  });
});
