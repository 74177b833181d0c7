/**
 * Default emptiness test for `llm` tools: nothing, a blank string, an array of empty parts
 * (Anthropic content blocks), or an object whose usual text field (`text` of the AI SDK,
 * `content` of chat messages and LangChain, `choices[0].message.content` of OpenAI-style
 * responses) is empty. A turn that calls tools, and anything else (a tool-use block, a number),
 * counts as an answer.
 */
export function isEmptyResponse(result: unknown, depth = 0): boolean {
  if (result === undefined || result === null) return true;
  if (typeof result === "string") return result.trim() === "";
  if (typeof result !== "object" || depth > 4) return false;
  if (Array.isArray(result)) return result.every((part) => isEmptyResponse(part, depth + 1));
  const r = result as { text?: unknown; content?: unknown; choices?: unknown; toolCalls?: unknown };
  // A turn that only calls tools has no text, and is still an answer.
  if (Array.isArray(r.toolCalls) && r.toolCalls.length > 0) return false;
  if ("text" in r) return isEmptyResponse(r.text, depth + 1);
  if ("content" in r) return isEmptyResponse(r.content, depth + 1);
  if (Array.isArray(r.choices)) {
    const message = (
      r.choices[0] as { message?: { content?: unknown; tool_calls?: unknown } } | undefined
    )?.message;
    if (Array.isArray(message?.tool_calls) && message.tool_calls.length > 0) return false;
    return isEmptyResponse(message?.content, depth + 1);
  }
  return false;
}
