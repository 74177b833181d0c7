/**
 * Redaction of secrets from free text (error messages, opted-in arguments) before it reaches a
 * span, a log or a notification.
 *
 * Input is cut first, so every pattern runs on a bounded string whatever the caller passes
 * (a 1 MB hostile message costs the same as a short one), and every quantifier is bounded or
 * anchored on a fixed prefix, so no pattern backtracks more than linearly.
 */

/** Default maximum length of redacted text on a span. */
export const DEFAULT_MAX_TEXT_LENGTH = 1024;

/** Extra input kept past the limit so a secret straddling the cut is still recognised. */
const LOOKAHEAD = 256;

const REPLACEMENTS: readonly (readonly [RegExp, string])[] = [
  // Authorization headers and bearer tokens.
  [/\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [REDACTED]"],
  // Provider keys: OpenAI/Anthropic (sk-...), Google (AIza...), Slack (xox?-), GitHub, AWS,
  // Stripe, Hugging Face.
  [/\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, "[REDACTED_KEY]"],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, "[REDACTED_KEY]"],
  [/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, "[REDACTED_KEY]"],
  [/\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/g, "[REDACTED_KEY]"],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, "[REDACTED_KEY]"],
  [/\b(?:rk|pk|sk|whsec)_(?:live|test)_[A-Za-z0-9]{10,}/g, "[REDACTED_KEY]"],
  [/\bhf_[A-Za-z0-9]{30,}/g, "[REDACTED_KEY]"],
  // JSON Web Tokens.
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, "[REDACTED_JWT]"],
  // key=value and "key": "value" pairs whose name says secret.
  [
    /\b(api[_-]?key|access[_-]?token|refresh[_-]?token|secret|password|passwd|token|auth)(["']?\s*[:=]\s*["']?)[^\s"'&,;()[\]{}]{4,}/gi,
    "$1$2[REDACTED]",
  ],
  // Credentials in URLs: scheme://user:pass@host
  [/\b([a-z][a-z0-9+.-]{1,15}:\/\/)[^\s/:@]{1,64}:[^\s/@]{1,128}@/gi, "$1[REDACTED]@"],
  // Email addresses.
  [
    /\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}\b/g,
    "[REDACTED_EMAIL]",
  ],
  // Long hex or base64 runs (hashes of secrets, raw keys).
  [/\b[A-Fa-f0-9]{32,}\b/g, "[REDACTED_HEX]"],
  [/(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}/g, "[REDACTED_SECRET]"],
];

/**
 * Removes tokens, keys, emails and long secrets from `text` and cuts it to `maxLength`
 * characters (an ellipsis marks the cut).
 */
export function redact(text: string, maxLength = DEFAULT_MAX_TEXT_LENGTH): string {
  let out = text.length > maxLength + LOOKAHEAD ? text.slice(0, maxLength + LOOKAHEAD) : text;
  for (const [pattern, replacement] of REPLACEMENTS) out = out.replace(pattern, replacement);
  return out.length > maxLength ? `${out.slice(0, maxLength - 1)}…` : out;
}

/**
 * A readable message for any thrown value: an Error's message, a string, or a bounded rendering
 * of anything else. Never throws (hostile getters and cycles included).
 */
export function describeThrown(value: unknown): string {
  try {
    if (value instanceof Error) return value.message || value.name;
    if (typeof value === "string") return value;
    if (value === undefined) return "undefined was thrown";
    if (value === null) return "null was thrown";
    if (typeof value === "object") {
      const message = (value as { message?: unknown }).message;
      if (typeof message === "string") return message;
      return boundedJson(value) ?? Object.prototype.toString.call(value);
    }
    if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
      return String(value);
    }
    if (typeof value === "symbol") return value.toString();
    return "a function was thrown";
  } catch {
    return "unprintable value was thrown";
  }
}

/** JSON text of `value`, cut to a bounded length; undefined when it cannot be serialised. */
export function boundedJson(
  value: unknown,
  maxLength = DEFAULT_MAX_TEXT_LENGTH * 4,
): string | undefined {
  try {
    const text = JSON.stringify(value, (_key, v: unknown) =>
      typeof v === "bigint" ? v.toString() : v,
    ) as string | undefined;
    return text === undefined ? undefined : text.slice(0, maxLength);
  } catch {
    return undefined;
  }
}
