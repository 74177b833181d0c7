/**
 * The default summariser of a context reset: deterministic, no model. Each output longer than
 * `maxChars` keeps its head and tail and says what was cut. An LLM summariser is a user function
 * of the same shape.
 */
export type Summariser = (outputs: readonly string[]) => string[] | Promise<string[]>;

export function headAndTail(
  outputs: readonly string[],
  { maxChars = 2_000, keep = 400 }: { maxChars?: number; keep?: number } = {},
): string[] {
  return outputs.map((text) => {
    if (text.length <= maxChars) return text;
    const cut = text.length - 2 * keep;
    return `${text.slice(0, keep)}\n[... ${cut} characters cut by selfheal's context reset ...]\n${text.slice(-keep)}`;
  });
}
