import { SelfHealConfigError } from "../errors.js";

/**
 * Redis key names. Every name that comes from users (agent, tool, dependency, alert kind) is
 * percent-encoded before it goes into a key or a hash field: what comes out is only letters,
 * digits and `-_.!~'()%`, so `:`, `{`, `}`, `|`, `*`, spaces, newlines and control characters can
 * never change a key's shape, its Cluster slot or a SCAN pattern. The keys of one agent share a
 * hash tag, so the read script (which touches them all) runs on one Cluster node.
 */

/**
 * A name as it may appear inside a key or a field: total and reversible for every JS string.
 * UTF-8 percent-encoding, as `encodeURIComponent` (so the keys of running fleets keep their
 * names), with two differences: `*` is `%2A` (a glob in SCAN MATCH), and an unpaired UTF-16
 * surrogate, which `encodeURIComponent` throws on, is encoded as its code point would be in
 * UTF-8 (`%ED%A0%80` for U+D800; the generalised UTF-8 of WTF-8): bytes no well-formed string
 * encodes to, so two names never share an encoding.
 *
 * @see https://simonsapin.github.io/wtf-8/ (the same bytes, without the percent-encoding)
 */
export function encodeName(name: string): string {
  if (PLAIN.test(name)) return name;
  let encoded: string;
  try {
    encoded = encodeURIComponent(name);
  } catch {
    // An unpaired surrogate: the pieces between them are well formed. A split on a capturing
    // pattern puts the surrogates at the odd indices.
    encoded = name
      .split(LONE_SURROGATE)
      .map((piece, i) => (i % 2 === 0 ? encodeURIComponent(piece) : surrogateBytes(piece)))
      .join("");
  }
  return encoded.includes("*") ? encoded.replaceAll("*", "%2A") : encoded;
}

/**
 * The name `encodeName` encoded (also the `*` of keys written before it was escaped). Never
 * throws: text that is no encoding (a stray `%`, bytes that are no UTF-8) is kept as it is.
 */
export function decodeName(encoded: string): string {
  if (!encoded.includes("%")) return encoded;
  try {
    return decodeURIComponent(encoded);
  } catch {
    return decodeLoose(encoded);
  }
}

/** Names that encode to themselves (the common case, no work). */
const PLAIN = /^[A-Za-z0-9\-_.!~'()]*$/;

/** A UTF-16 surrogate that is not half of a pair (code units: no `u` flag on purpose). */
const LONE_SURROGATE = /([\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF])/;

/** The three bytes of a surrogate code point (U+D800-U+DFFF) in generalised UTF-8. */
function surrogateBytes(unit: string): string {
  const c = unit.charCodeAt(0);
  return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map(hex).join("");
}

const hex = (byte: number) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;

/** The byte a `%XX` at `i` stands for, or -1. */
function byteAt(text: string, i: number): number {
  if (text.charCodeAt(i) !== 0x25) return -1;
  const digits = text.slice(i + 1, i + 3);
  return /^[0-9A-Fa-f]{2}$/.test(digits) ? parseInt(digits, 16) : -1;
}

/** Percent-decoding of generalised UTF-8 (surrogate code points allowed), never throwing. */
function decodeLoose(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const first = byteAt(text, i);
    if (first < 0) {
      out += text.charAt(i);
      i += 1;
      continue;
    }
    const seq = sequenceAt(text, i, first);
    if (seq) {
      out += String.fromCodePoint(seq.codePoint);
      i += 3 * seq.bytes;
    } else {
      out += text.slice(i, i + 3); // not a character: the escape stays as written
      i += 3;
    }
  }
  return out;
}

/** The code point of the (shortest-form) UTF-8 sequence starting with `first` at `i`. */
function sequenceAt(
  text: string,
  i: number,
  first: number,
): { codePoint: number; bytes: number } | undefined {
  if (first < 0x80) return { codePoint: first, bytes: 1 };
  let bytes: number;
  let codePoint: number;
  let low = 0x80; // the range of the second byte (the others: 0x80-0xBF)
  let high = 0xbf;
  if (first >= 0xc2 && first <= 0xdf) {
    bytes = 2;
    codePoint = first & 0x1f;
  } else if (first >= 0xe0 && first <= 0xef) {
    bytes = 3;
    codePoint = first & 0x0f;
    if (first === 0xe0) low = 0xa0;
  } else if (first >= 0xf0 && first <= 0xf4) {
    bytes = 4;
    codePoint = first & 0x07;
    if (first === 0xf0) low = 0x90;
    if (first === 0xf4) high = 0x8f;
  } else return undefined;
  for (let k = 1; k < bytes; k++) {
    const b = byteAt(text, i + 3 * k);
    if (k === 1 ? b < low || b > high : b < 0x80 || b > 0xbf) return undefined;
    codePoint = (codePoint << 6) | (b & 0x3f);
  }
  return { codePoint, bytes };
}

/** The prefix is the user's own namespace: plain characters only, checked once. */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(prefix)) {
    throw new SelfHealConfigError(
      "redisStore.prefix",
      `expected 1-64 letters, digits, "_", "." or "-", got ${JSON.stringify(String(prefix)).slice(0, 80)}`,
    );
  }
  return prefix;
}

/** The keys of one agent under one prefix. */
export class AgentKeys {
  /** `prefix:{agent}`: the hash tag every key of the agent starts with. */
  readonly tag: string;

  constructor(prefix: string, agent: string) {
    // An empty tag (`{}`) would hash the whole key: the empty name gets `%`, which no other
    // name encodes to (an encoded `%` is always followed by two hex digits).
    this.tag = `${prefix}:{${encodeName(agent) || "%"}}`;
  }

  /** Call counts and latency of one time bucket, a hash: `tool|ok`, `tool|f`, `tool|h<i>`. */
  calls(epoch: number): string {
    return `${this.tag}:c:${epoch}`;
  }

  /** Task outcomes of one time bucket, a hash: `ok`, `f`. */
  tasks(epoch: number): string {
    return `${this.tag}:t:${epoch}`;
  }

  /** The last-N rings of LLM answers (empty or not), a hash per agent. */
  get llm(): string {
    return `${this.tag}:llm`;
  }
}

/** The set of agents that wrote under a prefix (for `selfheal status`). */
export const agentsKey = (prefix: string): string => `${prefix}:agents`;

/** The hash tag of the state the whole fleet shares (breakers, ledger, budgets, alerts). */
export const fleetTag = (prefix: string): string => `${prefix}:{fleet}`;

/** Where a dependency's standing breaker verdict is kept: this prefix, then the encoded name. */
export const breakerKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:breaker:`;

/** Where the alert gate of one kind is kept (`:held` after it: the count held back). */
export const alertKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:alert:`;

/** Where a task's shared recovery spend is kept (then the hashed task id). */
export const budgetKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:budget:`;
