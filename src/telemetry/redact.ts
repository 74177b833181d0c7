/**
 * Redaction of secrets from free text (error messages, stacks, opted-in arguments) before it
 * reaches a span, an event, the event log, a log line or a notification; control characters are
 * escaped on the way, so error text can neither forge a line nor drive a terminal.
 *
 * Input is cut first, so every pattern runs on a bounded string whatever the caller passes
 * (a 1 MB hostile message costs the same as a short one), and every quantifier is bounded,
 * anchored on a fixed prefix or over a class its successor cannot match, so no pattern
 * backtracks more than a bounded amount per input position.
 *
 * What is kept on purpose (it is what a reader needs to act on the error): UUIDs, hex runs
 * shorter than 32 (short commit shas, request ids), stack-frame paths, camelCase and snake_case
 * identifiers, numbers that fail the Luhn check or a card prefix, and the word "password" in
 * prose. Hex runs of 32 or more (hex API keys look exactly like trace ids and full shas) and
 * long base64-looking runs that look random are redacted.
 */

/** Default maximum length of redacted text on a span. */
export const DEFAULT_MAX_TEXT_LENGTH = 1024;

/** Extra input kept past the limit so a secret straddling the cut is still recognised. */
const LOOKAHEAD = 256;

const REDACTED = "[REDACTED]";
const KEY = "[REDACTED_KEY]";

type Replacer = (match: string, ...groups: string[]) => string;

/** A value after an auth scheme that reads as a credential, not as a word of prose. */
const CREDENTIAL_LIKE = /[0-9._~+/=-]|.[A-Z]/;

/**
 * `Bearer abc`: keeps the scheme, drops a value that reads as a credential (a digit, a symbol,
 * inner capitals, or 16 letters and more); a word of prose stays ("Bearer authentication").
 */
const authScheme: Replacer = (match, scheme, space, value) =>
  CREDENTIAL_LIKE.test(value) || value.length >= 16 ? `${scheme}${space}${REDACTED}` : match;

/**
 * Specific shapes first (so they keep their label), generic ones last. Each pattern is linear:
 * fixed prefixes, bounded repeats, or classes the next token cannot start with.
 */
const PATTERNS: readonly (readonly [RegExp, string | Replacer])[] = [
  // A whole PEM private key block (RSA, EC, OPENSSH, ENCRYPTED, PGP), to its END line or, when
  // the END was cut off, to the end of the text.
  [
    /-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)/g,
    "[REDACTED_PRIVATE_KEY]",
  ],
  // Webhook URLs whose path is the secret (Slack, Discord): the host stays.
  [/(hooks\.slack\.com\/(?:services|workflows|triggers)\/)[A-Za-z0-9_/-]{8,200}/g, `$1${REDACTED}`],
  [/(discord(?:app)?\.com\/api\/webhooks\/)[0-9]{5,30}\/[A-Za-z0-9_-]{8,200}/g, `$1${REDACTED}`],
  // Provider keys: OpenAI/Anthropic (sk-...), Google (AIza..., ya29., GOCSPX-), Slack (xox?-),
  // GitHub, GitLab (glpat-...), AWS, Stripe, Hugging Face, SendGrid, npm, PyPI, Groq, xAI,
  // Perplexity, Replicate, DigitalOcean, Shopify, HashiCorp Vault, Linear, Square, Twilio,
  // Mailgun, Databricks, Telegram bots.
  [/\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, KEY],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, KEY],
  [/\bxox[abposre]-[A-Za-z0-9-]{10,}/g, KEY],
  [/\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/g, KEY],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, KEY],
  [/\b(?:rk|pk|sk|whsec)_(?:live|test)_[A-Za-z0-9]{10,}/g, KEY],
  [/\bhf_[A-Za-z0-9]{30,}/g, KEY],
  [/\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}/g, KEY],
  [
    /\b(?:gl(?:pat|dt|rt|ptt|soat|cbt|imt|oas|ffct)-|npm_|pypi-|gsk_|xai-|pplx-|r8_|do[opr]_v1_|shp(?:at|ca|pa|ss)_|hv[sb]\.|lin_api_|sq0(?:atp|csp)-|ya29\.|GOCSPX-|whsec_)[A-Za-z0-9_-]{16,}/g,
    KEY,
  ],
  [/\b(?:SK[0-9a-fA-F]{32}|key-[0-9a-f]{32}|dapi[0-9a-f]{32})\b/g, KEY],
  [/\b[0-9]{8,10}:AA[A-Za-z0-9_-]{30,40}\b/g, KEY],
  // JSON Web Tokens (two segments are enough: a token cut at the limit still goes).
  // Starts only where a run of token characters starts: a long run is scanned once.
  [
    /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?/g,
    "[REDACTED_JWT]",
  ],
  // Credentials in URLs: scheme://user:pass@host, scheme://:pass@host, scheme://long-token@host.
  [
    /\b([a-z][a-z0-9+.-]{1,15}:\/\/)(?:[^\s/:@]{0,64}:[^\s/@]{1,128}|[^\s/:@]{20,128})@/gi,
    `$1${REDACTED}@`,
  ],
  // Authorization schemes in free text.
  [/\b(bearer|basic|token|digest|bot)(\s+)([A-Za-z0-9._~+/=-]{8,})/gi, authScheme],
];

/**
 * Key names that say the value is secret, matched on the key's last word(s):
 * `password`, `DB_PASSWORD`, `clientSecret`, `x-api-key`, `session_token`, `Set-Cookie`.
 */
const SECRET_WORD =
  /^(?:[a-z0-9]*(?:password|passwd|passphrase|secret|token|cookie|credentials?|apikey|accesskey|privatekey|secretkey|signingkey|accountkey|sessionid|sessid)|pwd|pass|auth|authorization|signature|sig|sid|session|jwt)$/;
/** `<word> key` pairs: `api_key`, `secret-key`, `AccountKey`, `SharedAccessKey`. */
const KEY_OWNERS = new Set([
  "api",
  "access",
  "private",
  "secret",
  "signing",
  "encryption",
  "master",
  "subscription",
  "license",
  "account",
  "auth",
  "client",
  "app",
  "service",
  "session",
]);
/** Keys whose unquoted value runs to the end of the line (HTTP headers). */
const HEADER_WORD = /^(?:cookie|authorization)$/;
const SCHEME =
  /^(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Negotiate|NTLM|OAuth|AWS4-HMAC-SHA256)\s+/i;
const WORDS = /[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])/;

/** The key's words, lower-cased: `X-Api-Key` -> x, api, key; `clientSecret` -> client, secret. */
function keyWords(key: string): string[] {
  return key
    .split(WORDS)
    .filter((w) => w !== "")
    .map((w) => w.toLowerCase());
}

/** Cheap first look: a key without any of these stems is never secret. */
const SECRET_STEM = /pass|pwd|secret|token|cookie|cred|key|auth|sig|sid|sess|jwt/i;

function isSecretKey(words: readonly string[]): boolean {
  const last = words.at(-1) ?? "";
  const before = words.at(-2) ?? "";
  if (SECRET_WORD.test(last)) return true;
  if (last === "key") return KEY_OWNERS.has(before);
  return last === "id" && before === "session";
}

/**
 * A key, the quote that may close it, and a separator: `password=`, `"api_key": `,
 * `\"password\":`, `Set-Cookie: `, `secret => `, `token := `. A key starts where a name starts
 * (`--password=` and `spring.datasource.password=` are whole keys), never inside one, so a long
 * run of name characters is scanned once.
 */
const PAIR =
  /(?<![A-Za-z0-9_.]|[A-Za-z0-9_.]-)([A-Za-z][A-Za-z0-9_.-]{0,127})(\\{0,7}["'`]?)([ \t]{0,4}(?:=>|:=|[:=])[ \t]{0,4})/g;
/** An opening quote, possibly escaped (JSON inside a JSON string): `"`, `'`, `\"`, `\\\"`. */
const QUOTE = /\\{0,7}["'`]/y;
/** Where an unquoted value ends. */
const VALUE_END = /[\s"'`&,;)\]}<>\\]/;
/** Where a header value ends. */
const HEADER_END = /[\r\n"'`\\]/;

/**
 * Index of the quote that closes a value opened by `quote` (a quote character after k = 0, 1, 3
 * or 7 backslashes: JSON nested k deep in JSON strings). At that depth a backslash of the value
 * is written 2^d = k + 1 times, so the closing quote follows k backslashes plus whole pairs of
 * escaped ones: n - k backslashes, a multiple of 2(k + 1). Any other count is an escaped quote
 * inside the value. -1 when the value never closes (it is then cut at the end of its line).
 */
function closing(text: string, quote: string, from: number): number {
  const k = quote.length - 1;
  const mark = quote.charAt(k);
  for (let at = text.indexOf(mark, from + k); at >= 0; at = text.indexOf(mark, at + 1)) {
    let n = 0;
    while (at - n > from && text.charAt(at - n - 1) === "\\") n++;
    if (n >= k && (n - k) % (2 * (k + 1)) === 0) return at - k;
  }
  return -1;
}

/** End of the first character of `set` at or after `from`, or of the text. */
function endOf(text: string, set: RegExp, from: number): number {
  for (let i = from; i < text.length; i++) if (set.test(text.charAt(i))) return i;
  return text.length;
}

/** End of a `[...]` or `{...}` value (depth counted, bounded), or of the line. */
function bracketEnd(text: string, from: number): number {
  const open = text.charAt(from);
  const close = open === "[" ? "]" : "}";
  let depth = 0;
  const limit = Math.min(text.length, from + 1024);
  for (let i = from; i < limit; i++) {
    const c = text.charAt(i);
    if (c === open) depth++;
    else if (c === close && --depth === 0) return i + 1;
  }
  return endOf(text, /[\r\n]/, from);
}

/**
 * Replaces the value of every pair whose key says secret. Quoted values go whole (spaces,
 * escaped quotes and all), bracketed ones to their close, header values (Cookie,
 * Authorization) to the end of the line, other unquoted ones to the next delimiter. A `key: word
 * word` run of plain words after a colon is prose ("password: must be longer") and is kept.
 */
function redactPairs(text: string): string {
  let out = "";
  let copied = 0;
  PAIR.lastIndex = 0;
  for (let m = PAIR.exec(text); m !== null; m = PAIR.exec(text)) {
    const key = m[1] ?? "";
    if (!SECRET_STEM.test(key)) continue;
    const words = keyWords(key);
    if (!isSecretKey(words)) continue;
    const separator = m[3] ?? "";
    const start = m.index + m[0].length;
    if (text.startsWith("[REDACTED", start)) continue;
    let from = start;
    let end: number;
    QUOTE.lastIndex = start;
    const quote = QUOTE.exec(text)?.[0];
    const first = text.charAt(start);
    if (quote !== undefined) {
      from = start + quote.length;
      const close = closing(text, quote, from);
      end = close >= 0 ? close : endOf(text, /[\r\n]/, from);
    } else if (first === "[" || first === "{") {
      end = bracketEnd(text, start);
    } else if (HEADER_WORD.test(words.at(-1) ?? "")) {
      const scheme = SCHEME.exec(text.slice(start, start + 40))?.[0];
      if (scheme !== undefined) from = start + scheme.length;
      end = endOf(text, HEADER_END, from);
    } else {
      end = endOf(text, VALUE_END, start);
      const value = text.slice(start, end);
      const prose =
        !separator.includes("=") &&
        separator.endsWith(" ") &&
        /^[A-Za-z]+$/.test(value) &&
        / [A-Za-z]/.test(text.slice(end, end + 2));
      if (prose) continue;
    }
    if (end <= from) continue;
    out += text.slice(copied, from) + REDACTED;
    copied = end;
    PAIR.lastIndex = end;
  }
  return out + text.slice(copied);
}

/** Luhn checksum of a digit string. */
function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** A payment card prefix (Visa, Mastercard incl. 2221-2720, Amex, Diners, JCB, Discover, ...). */
function cardPrefix(digits: string): boolean {
  // The card pattern only lets 2 to 6 start a number; 3 to 6 are all card prefixes.
  if (digits.charAt(0) !== "2") return true;
  const four = Number(digits.slice(0, 4));
  return four >= 2221 && four <= 2720;
}

/**
 * A card number: 13 to 19 digits, maybe grouped by spaces or dashes, with a card prefix and a
 * valid Luhn check digit. The longest run of whole groups that passes goes; the rest stays (an
 * expiry or an amount written after the number is not eaten, nor is an order id that fails).
 */
const card: Replacer = (match) => {
  const groups = match.split(/[ -]/);
  let digits = groups.join("");
  let kept = match.length;
  for (let n = groups.length; n > 0; n--) {
    if (digits.length >= 13 && digits.length <= 19 && cardPrefix(digits) && luhn(digits)) {
      return `[REDACTED_CARD]${match.slice(kept)}`;
    }
    const last = groups[n - 1] ?? "";
    digits = digits.slice(0, digits.length - last.length);
    kept -= last.length + 1; // and its separator (kept is unused once the first group goes)
  }
  return match;
};

/** Shannon entropy of `text`, bits per character. */
function entropy(text: string): number {
  const counts = new Map<string, number>();
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / text.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const PATH_WORD = /^[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*$/;

/**
 * Whether a long base64-alphabet run looks random (a key, a token, a blob) rather than a path or
 * an identifier: upper, lower and digits all present, upper case not only at word starts
 * (camelCase), not a path of lower-case words, and high entropy. Measured on random base64 of 40
 * characters, about 0.6% are kept; of 60 or more, about 0.1%.
 */
function looksRandom(run: string): boolean {
  const core = run.replace(/={1,2}$/, ""); // the run ends in at most two (GENERIC's pattern)
  let upper = 0;
  let lower = 0;
  let digits = 0;
  let upperNotAtWordStart = 0;
  for (let i = 0; i < core.length; i++) {
    const c = core.charCodeAt(i);
    if (c >= 65 && c <= 90) {
      upper++;
      const next = core.charCodeAt(i + 1);
      if (!(next >= 97 && next <= 122)) upperNotAtWordStart++;
    } else if (c >= 97 && c <= 122) lower++;
    else if (c >= 48 && c <= 57) digits++;
  }
  if (upper === 0 || lower === 0 || digits === 0) return false;
  if (upperNotAtWordStart < upper * 0.25) return false;
  const segments = core.split("/");
  // Two lower-case path words and a segment holding the upper case: three segments at least.
  if (segments.filter((s) => s.length >= 2 && PATH_WORD.test(s)).length >= 2) return false;
  return entropy(core) >= 3.8;
}

const GENERIC: readonly (readonly [RegExp, string | Replacer])[] = [
  // Email addresses (tried only where a local part can start: a long run is scanned once; the
  // user of a URL, `postgres://app@db`, is not an address).
  [
    /(?<![A-Za-z0-9._%+-]|:\/\/)[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}\b/g,
    "[REDACTED_EMAIL]",
  ],
  // Payment card numbers (Luhn-checked).
  [/(?<![\w.+-])[2-6](?:[ -]?[0-9]){12,18}(?!\w)/g, card],
  // Long hex runs (hex API keys, hashes of secrets; trace ids and full shas look the same).
  [/\b(?:0x)?[A-Fa-f0-9]{32,}\b/g, "[REDACTED_HEX]"],
  // Long base64-alphabet runs that look random.
  [
    /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}/g,
    (run) => (looksRandom(run) ? "[REDACTED_SECRET]" : run),
  ],
];

/*
 * What no printed text may carry raw: C0 and C1 controls, DEL, line/paragraph separators, bidi
 * embeddings, overrides, isolates and marks (U+202A-E, U+2066-9, U+200E-F, U+061C), and the
 * invisible format characters that can hide or smuggle text: soft hyphen, Mongolian vowel
 * separator, zero-width space, word joiner and invisible operators, deprecated format controls,
 * BOM, interlinear annotations, and Unicode tags (U+E0000-E007F, a surrogate pair each). Zero-width
 * joiners (U+200C-D) are kept: emoji and scripts need them.
 */
/** Every unsafe code point but tab and line feed. */
const CONTROL =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|\udb40[\udc00-\udc7f]/g;
/** Every unsafe code point, tab and line feed included. */
const CONTROL_OR_NEWLINE =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|\udb40[\udc00-\udc7f]/g;

const escapeChar = (c: string): string => {
  if (c === "\n") return "\\n";
  if (c === "\r") return "\\r";
  if (c === "\t") return "\\t";
  const code = c.codePointAt(0) ?? 0;
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, "0")}`;
  return code <= 0xffff ? `\\u${code.toString(16).padStart(4, "0")}` : `\\u{${code.toString(16)}}`;
};

/** Each UTF-16 unit of `c` as `\uXXXX`: how JSON writes any code point. */
const jsonEscape = (c: string): string => {
  let out = "";
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
};

/**
 * `JSON.stringify(value, null, space)` with every unsafe code point a `\uXXXX` escape: still JSON,
 * parsing to the same value, but safe to print and to paste (JSON.stringify itself writes DEL, C1
 * controls, bidi overrides and U+2028 raw). Raw tabs and line feeds in its output are its own
 * indentation (it escapes them in strings), and stay.
 */
export function safeJson(value: unknown, space?: number): string {
  // undefined for a value JSON has no text for (undefined, a function): JSON's null.
  const json = JSON.stringify(value, null, space) as string | undefined;
  return (json ?? "null").replace(CONTROL, jsonEscape);
}

/**
 * Makes control characters visible (`\x1b`, `\r`, `\u202e`) so text cannot move the cursor,
 * colour or clear a terminal, reorder what is shown, or start a line of its own. Line feeds and
 * tabs are kept; `\r\n` becomes `\n`.
 */
export function escapeControl(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(CONTROL, escapeChar);
}

/** `escapeControl`, line feeds and tabs included: the text stays on one line. */
export function oneLine(text: string): string {
  return text.replace(CONTROL_OR_NEWLINE, escapeChar);
}

/**
 * Removes keys, tokens, passwords, cookies, private keys, card numbers, emails and long random
 * runs from `text`, escapes control characters, and cuts it to `maxLength` characters (an
 * ellipsis marks the cut). Idempotent: redacting redacted text changes nothing.
 */
export function redact(text: string, maxLength = DEFAULT_MAX_TEXT_LENGTH): string {
  return cutText(escapeControl(withoutSecrets(text, maxLength)), maxLength);
}

/**
 * `redact` before its escaping and its cut: the secrets gone from the first `maxLength` characters
 * (and a lookahead), control characters left for the caller to escape its own way (`oneLine`).
 */
export function withoutSecrets(text: string, maxLength = DEFAULT_MAX_TEXT_LENGTH): string {
  const out = text.length > maxLength + LOOKAHEAD ? text.slice(0, maxLength + LOOKAHEAD) : text;
  if (!mayHoldSecret(out)) return out;
  return out.includes("\u001b") ? redactAfterEscapes(out) : redactSecrets(out);
}

/**
 * A terminal escape sequence (CSI such as `ESC[31m`, OSC such as `ESC]0;title BEL`, or ESC and one
 * character). Its classes do not overlap and the OSC body is bounded: linear.
 */
const ESCAPE_SEQUENCE =
  // eslint-disable-next-line no-control-regex
  /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]{0,256}(?:\u0007|\u001b\\)?|[^])/g;
/** A private-use character: not a word character, so `\b` sees a word start after it. */
const MARK = "\ue000";

/**
 * redactSecrets on coloured text: `ESC[31msk-proj-...` hides the key's start from `\b` (the `m`
 * is a word character). A mark after each sequence ends it as a word; the marks go after.
 */
function redactAfterEscapes(text: string): string {
  return redactSecrets(text.replace(ESCAPE_SEQUENCE, `$&${MARK}`)).replaceAll(MARK, "");
}

/** `text` cut to `maxLength` characters, an ellipsis marking the cut. */
export function cutText(text: string, maxLength: number): string {
  return text.length > maxLength ? `${text.slice(0, maxLength - 1)}…` : text;
}

/** Every pattern, pair and generic shape replaced. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of PATTERNS)
    out = out.replace(pattern, replacement as (m: string, ...g: string[]) => string);
  out = redactPairs(out);
  for (const [pattern, replacement] of GENERIC)
    out = out.replace(pattern, replacement as (m: string, ...g: string[]) => string);
  return out;
}

/** A mark one of the shapes needs: a pair's separator, an address, a PEM block, a scheme. */
const SECRET_MARK = /[:=@]|-----BEGIN|bearer|basic|token|digest|bot/i;
/**
 * Run of characters every other shape is made of (keys, tokens, JWTs, hex, base64, webhook
 * paths): the shortest such secret is 15 long (`xoxb-` and 10 more).
 */
const SHORTEST_RUN = 15;
/** Digits of the shortest card number. */
const CARD_DIGITS = 13;

/**
 * Whether `text` could hold a shape redactSecrets replaces: false only when it has none of
 * SECRET_MARK, no run of SHORTEST_RUN key characters and fewer than CARD_DIGITS digits. Most error
 * text ("timeout after 30000 ms") then skips some twenty regex passes: the event log's review
 * redacts every unrecovered error of millions.
 */
export function mayHoldSecret(text: string): boolean {
  if (SECRET_MARK.test(text)) return true;
  let run = 0;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const digit = c >= 48 && c <= 57;
    // [A-Za-z0-9_.+/~=-]
    const key =
      digit ||
      (c >= 65 && c <= 90) ||
      (c >= 97 && c <= 122) ||
      c === 95 ||
      c === 46 ||
      c === 43 ||
      c === 47 ||
      c === 126 ||
      c === 61 ||
      c === 45;
    if (!key) run = 0;
    else if (++run >= SHORTEST_RUN) return true;
    if (digit && ++digits >= CARD_DIGITS) return true;
  }
  return false;
}

/** A logger whose lines stay one line each and whose failures never reach the caller. */
export function safeLogger(logger: { warn(message: string): void }): {
  warn(message: string): void;
} {
  return {
    warn(message: string) {
      try {
        logger.warn(oneLine(message));
      } catch {
        // A logger that throws must not break the call that logs.
      }
    },
  };
}

/** Reads one property; undefined when the read throws (hostile getters, revoked proxies). */
function read(value: object, key: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: (value as Record<string, unknown>)[key] };
  } catch {
    return { ok: false };
  }
}

/** `instanceof Error` that a Proxy's throwing `getPrototypeOf` trap cannot break. */
export function isError(value: unknown): value is Error {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

/**
 * A readable message for any thrown value: an Error's message, a string, or a bounded rendering
 * of anything else. Never throws, and always returns a string: hostile getters, Proxies whose
 * traps throw, throwing `toString`/`toJSON`/`Symbol.toPrimitive`, cycles and non-string
 * messages included.
 */
export function describeThrown(value: unknown): string {
  try {
    if (typeof value === "string") return value;
    if (value === undefined) return "undefined was thrown";
    if (value === null) return "null was thrown";
    if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
      return String(value);
    }
    if (typeof value === "symbol") return value.toString();
    if (typeof value === "function") return "a function was thrown";
    const message = read(value, "message");
    if (message.ok && typeof message.value === "string" && message.value !== "") {
      return message.value;
    }
    if (isError(value)) {
      const name = read(value, "name");
      const label = name.ok && typeof name.value === "string" && name.value ? name.value : "Error";
      return message.ok ? label : `${label} (its message could not be read)`;
    }
    if (message.ok && typeof message.value === "string") return message.value;
    return boundedJson(value) ?? Object.prototype.toString.call(value);
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
    return typeof text === "string" ? text.slice(0, maxLength) : undefined;
  } catch {
    return undefined;
  }
}
