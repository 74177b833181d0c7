/**
 * The linear-time engine behind users' `message` regexes (rules given in code, rule files,
 * suggested rules): a JavaScript RegExp is translated to RE2 syntax and run by re2js, whose cost
 * grows with the text, never with how a pattern could backtrack. Built-in regexes stay on V8
 * (checked by recheck in the suite); both meet the matcher through TextPattern.
 */
import { RE2JS } from "re2js";

/** What the matcher runs over an error's text: a V8 RegExp or a compiled user regex. */
export interface TextPattern {
  readonly source: string;
  test(text: string): boolean;
}

/**
 * Largest RE2 program of one user regex (instructions, re2js' programSize): keeps compiling and
 * the load-time walk below cheap. A rule of a few phrases is 20 to 150.
 */
export const MAX_PROGRAM_SIZE = 300;

/**
 * What one call may cost: the sum of the user regexes' costs, in threads stepped per character of
 * the text (at most MAX_MATCH_TEXT, 4 KiB). re2js' test() runs a lazily built DFA whose states
 * stay cached between calls; a user regex is taken only if its whole DFA is small enough to build
 * at load (walkDfa), so that a call is one cached step a character, which costs about what
 * stepping DFA_STEP_COST threads does: 60 regexes. A regex whose DFA is larger meets a new state
 * at a hostile text's every character, each costing about 130 ns a thread (a 229-instruction
 * regex of counted repeats: 118 ms on a 4 KiB text), and is refused. Measured
 * (bench/linear-rules.ts): a diagnosis of a 1 MB hostile error with 60 regexes, 4.0 to 4.9 ms.
 */
export const MAX_MATCH_COST = 240;
/** What a regex whose DFA is built at load costs per character, in threads (measured). */
export const DFA_STEP_COST = 4;
/** Most work (threads stepped) spent building a regex's DFA at load; past it, it is refused. */
const MAX_WALK_WORK = 100_000;

/** Where the reasons send people. */
const WHY =
  "selfheal matches your rules with a linear-time engine (RE2 syntax), see docs/diagnosis.md";

/** JavaScript's `\s` (RE2's is ASCII only, without \v): a suggested rule splits words on it. */
const JS_SPACE =
  "\\t\\n\\x{b}\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}";
/** JavaScript's `.` without the s flag: anything but a line terminator (RE2's: but \n). */
const JS_DOT = "[^\\n\\r\\x{2028}\\x{2029}]";

/** A regex RE2 cannot run as JavaScript would; `reason` says what and why. */
class Unsupported extends Error {}

const unsupported = (what: string): never => {
  throw new Unsupported(`${what} is not supported: ${WHY}`);
};

/** The escape at `source[i]` (the character after a backslash), in RE2 syntax; `[out, consumed]`. */
function escape(source: string, i: number, inClass: boolean, unicode: boolean): [string, number] {
  const c = source.charAt(i);
  const rest = source.slice(i + 1);
  if (c === "s") return [inClass ? JS_SPACE : `[${JS_SPACE}]`, 1];
  if (c === "S")
    return inClass ? unsupported("\\S inside a character class") : [`[^${JS_SPACE}]`, 1];
  if (c === "b") return [inClass ? "\\x{8}" : "\\b", 1];
  if (/[1-9]/.test(c)) return unsupported(`a backreference (\\${c})`);
  if (c === "k" && (unicode || /[(]\?<[^=!]/.test(source)))
    return unsupported("a backreference (\\k<name>)");
  if (c === "0") return /^[0-9]/.test(rest) ? unsupported("an octal escape") : ["\\x{0}", 1];
  if (c === "u") {
    const braced = unicode ? /^\{([0-9a-fA-F]{1,6})\}/.exec(rest) : null;
    if (braced) return [`\\x{${braced[1]}}`, 1 + braced[0].length];
    const four = /^[0-9a-fA-F]{4}/.exec(rest);
    return four ? [`\\x{${four[0]}}`, 5] : ["u", 1];
  }
  if (c === "c" && /^[A-Za-z]/.test(rest))
    return [`\\x{${(rest.charCodeAt(0) % 32).toString(16)}}`, 2];
  if (/[dDwWBfnrtvx]/.test(c)) return [`\\${c}`, 1];
  if ((c === "p" || c === "P") && unicode) return [`\\${c}`, 1]; // \p{L}: RE2 knows the classes
  // Any other letter or digit is itself in JavaScript (`\e` is "e"); RE2 gives some a meaning
  // (`\z`, `\Q`, `\pN`), so it goes unescaped. Punctuation stays escaped.
  if (/[\p{L}\p{N}]/u.test(c) || c.charCodeAt(0) > 0x7f) return [c, 1];
  return [`\\${c}`, 1];
}

/** `source` (of a RegExp with `flags`) in RE2 syntax, meaning the same. */
export function toRe2Syntax(source: string, flags: string): string {
  const unicode = flags.includes("u") || flags.includes("v");
  const dotAll = flags.includes("s");
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source.charAt(i);
    if (c === "\\") {
      const [text, consumed] = escape(source, i + 1, inClass, unicode);
      out += text;
      i += consumed;
    } else if (inClass) {
      if (c === "]") inClass = false;
      out += c;
    } else if (c === "[") {
      // JavaScript's `[]` matches nothing and `[^]` anything; in RE2 a `]` first is a literal.
      if (source.startsWith("[^]", i)) {
        out += "[\\x{0}-\\x{10ffff}]";
        i += 2;
      } else if (source.startsWith("[]", i)) {
        out += "[^\\x{0}-\\x{10ffff}]";
        i += 1;
      } else {
        inClass = true;
        const negated = source.charAt(i + 1) === "^";
        out += negated ? "[^" : "[";
        if (negated) i++;
      }
    } else if (c === "(" && source.startsWith("(?=", i)) unsupported("lookahead (?=...)");
    else if (c === "(" && source.startsWith("(?!", i)) unsupported("negative lookahead (?!...)");
    else if (c === "(" && source.startsWith("(?<=", i)) unsupported("lookbehind (?<=...)");
    else if (c === "(" && source.startsWith("(?<!", i)) unsupported("negative lookbehind (?<!...)");
    else if (c === "." && !dotAll) out += JS_DOT;
    else out += c;
  }
  return out;
}

/** A user regex compiled for the linear engine, or why it cannot be. */
export type LinearResult =
  { pattern: TextPattern; size: number; cost: number } | { reason: string };

/** re2js' lazily built DFA, as far as walkDfa uses it (re2js 2.x internals). */
interface DfaState {
  nfaStates: readonly number[];
}
interface Dfa {
  classBounds: Int32Array;
  start(
    input: { context(pos: number): number; step(pos: number): number },
    pos: number,
  ): DfaState | null;
  step(state: DfaState, cls: number, rune: number, anchor: number): DfaState | null;
}

/** re2js' UNANCHORED; a text's start is both BEGIN_TEXT (4) and BEGIN_LINE (1), as test() sees it. */
const UNANCHORED = 0;
const TEXT_START = { context: () => 5, step: () => -1 };

/**
 * Builds the whole DFA of `compiled` into its cache, one step per state and rune class, if that
 * takes at most MAX_WALK_WORK; true when it did (every call is then one cached step a character),
 * false when the DFA is larger.
 */
function walkDfa(compiled: RE2JS): boolean {
  const dfa = (compiled as unknown as { re2Input?: { dfa?: Dfa } }).re2Input?.dfa;
  // re2js' internals as 2.10 has them (package.json pins it; the suite fails if they move).
  if (!dfa || typeof dfa.step !== "function" || !(dfa.classBounds instanceof Int32Array))
    throw new Error("re2js' DFA is not the one selfheal knows: pin re2js as package.json does");
  // One rune of each class: class 0 starts at 0, class k at the k-th bound.
  const runes = [0, ...dfa.classBounds];
  const start = dfa.start(TEXT_START, 0);
  if (!start) return false;
  const seen = new Set([start]);
  const pending = [start];
  let work = 0;
  for (let state = pending.pop(); state; state = pending.pop())
    for (const [cls, rune] of runes.entries()) {
      work += state.nfaStates.length + 1;
      if (work > MAX_WALK_WORK) return false;
      const next = dfa.step(state, cls, rune, UNANCHORED);
      if (!next) return false; // out of the DFA's memory: it would be rebuilt during calls
      if (!seen.has(next)) {
        seen.add(next);
        pending.push(next);
      }
    }
  return true;
}

/**
 * `re` compiled for re2js, flags i, m and s carried over (g and y are refused by the rule
 * validator; u only changes how the source reads; d is irrelevant to a test), with its cost per
 * character (MAX_MATCH_COST).
 */
export function compileLinear(re: RegExp): LinearResult {
  let translated: string;
  try {
    translated = toRe2Syntax(re.source, re.flags);
  } catch (error) {
    if (error instanceof Unsupported) return { reason: error.message };
    throw error;
  }
  let flags = 0;
  if (re.ignoreCase) flags |= RE2JS.CASE_INSENSITIVE;
  if (re.multiline) flags |= RE2JS.MULTILINE;
  if (re.dotAll) flags |= RE2JS.DOTALL;
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(translated, flags);
  } catch (error) {
    const why = (error as Error).message.replace(/^error parsing regexp: /, "");
    return { reason: `RE2 cannot compile it (${why}): ${WHY}` };
  }
  const size = compiled.programSize();
  if (size > MAX_PROGRAM_SIZE)
    return {
      reason: `too large for the linear engine (${size} instructions, at most ${MAX_PROGRAM_SIZE}): split it into several rules or use shorter counted repeats`,
    };
  if (!walkDfa(compiled))
    return {
      reason: `too many states for the linear engine to build at load (counted repeats or wildcards in a row, like .{0,20}a.{0,20}b or [ab]*a[ab]{20}): a hostile text would make every character cost a new state; use shorter counted repeats or fewer wildcards`,
    };
  const cost = DFA_STEP_COST;
  // The first calls run cold (tens of ms while re2js' code warms up): once here, at load.
  compiled.test("");
  return { pattern: { source: re.source, test: (text) => compiled.test(text) }, size, cost };
}
