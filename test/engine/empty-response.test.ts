import { describe, expect, it } from "vitest";
import type { ToolCallEvent } from "../../src/index.js";
import { virtualInstance } from "../helpers/engine.js";

/**
 * Whether an `llm` tool with the default emptiness test counts `result` as an empty answer, as
 * the call record says. Recovery is off, so an empty answer is still the call's answer.
 */
async function countsAsEmpty(result: unknown): Promise<boolean | undefined> {
  const { sh } = virtualInstance();
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const complete = sh.tool("complete", { readOnly: true, kind: "llm" }, () => result);
  await expect(complete(undefined)).resolves.toBe(result);
  expect(calls).toHaveLength(1);
  return calls[0]?.empty;
}

/** `inner` wrapped `levels` times by `wrap`. */
function nest(levels: number, inner: unknown, wrap: (x: unknown) => unknown): unknown {
  let value = inner;
  for (let i = 0; i < levels; i++) value = wrap(value);
  return value;
}

const chat = (content: unknown, toolCalls?: unknown) => ({
  choices: [{ message: { content, ...(toolCalls !== undefined && { tool_calls: toolCalls }) } }],
});

describe("the default emptiness test of llm tools", () => {
  it.each([
    ["undefined", undefined],
    ["null", null],
    ["a blank string", " \n\t "],
    ["an empty list of parts", []],
    ["a list of blank parts (Anthropic content blocks)", ["", { type: "text", text: "  " }]],
    ["an AI SDK result with blank text", { text: "" }],
    ["a chat message with no content", { role: "assistant", content: null }],
    ["a message whose content is blank blocks", { content: [{ type: "text", text: "" }] }],
    ["an AI SDK result with an empty toolCalls list", { text: "", toolCalls: [] }],
    ["an OpenAI response with blank content", chat("  ")],
    ["an OpenAI response with an empty tool_calls list", chat(null, [])],
    ["an OpenAI response with no choices", { choices: [] }],
    ["an OpenAI choice with no message", { choices: [{ finish_reason: "length" }] }],
    ["a message nested four levels down that is blank", nest(4, { text: "" }, (x) => [x])],
    ["blank text five objects deep", nest(5, "", (x) => ({ text: x }))],
  ])("%s is empty", async (_name, result) => {
    expect(await countsAsEmpty(result)).toBe(true);
  });

  it.each([
    ["a string with text", "hello"],
    ["a number", 0],
    ["a boolean", false],
    ["a list with one non-blank part", ["", "answer"]],
    ["an AI SDK result with text", { text: "hi" }],
    ["an AI SDK turn that only calls tools", { text: "", toolCalls: [{ toolName: "search" }] }],
    ["a chat message with content", { content: "hi" }],
    ["text wins over content", { text: "hi", content: "" }],
    ["an OpenAI response with content", chat("hi")],
    ["an OpenAI turn that only calls tools", chat(null, [{ id: "call_1" }])],
    ["an OpenAI-like response whose choices is not a list", { choices: "unexpected" }],
    ["an object with no known text field (a tool-use block)", { type: "tool_use", id: "t1" }],
    // Past four levels of nesting the test stops looking: an answer, not an empty one.
    ["blank text six objects deep", nest(6, "", (x) => ({ text: x }))],
    ["blank content six objects deep", nest(6, "", (x) => ({ content: x }))],
    ["a blank part six lists deep", nest(6, "", (x) => [x])],
    ["blank chat content six responses deep", nest(6, "", (x) => chat(x))],
    ["a message nested five lists down that is blank", nest(5, { text: "" }, (x) => [x])],
  ])("%s is an answer", async (_name, result) => {
    expect(await countsAsEmpty(result)).toBe(false);
  });

  it("a content field is read when there is no text field, and only then", async () => {
    expect(await countsAsEmpty({ content: "", choices: [{ message: { content: "hi" } }] })).toBe(
      true,
    );
    expect(await countsAsEmpty({ choices: [{ message: { content: "hi" } }] })).toBe(false);
  });
});
