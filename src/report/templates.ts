/**
 * Error texts grouped into templates, deterministically and in bounded memory: a log-template
 * miner in the manner of Drain (He et al., ICWS 2017). A text is cut into words; the parts that
 * vary between two occurrences of the same error (numbers, ids, hosts, quoted values, what the
 * redaction replaced) are masked as `<*>` first; texts with the same number of words and the
 * same first word are compared position by position, and one that agrees with a template on at
 * least SIMILARITY of its words joins it, the words that differ becoming `<*>` too.
 *
 * The same texts in the same order always give the same templates: no randomness, no model.
 */

/** A masked word: stands for any one word. */
export const WILDCARD = "<*>";

/**
 * Words that vary from one occurrence of an error to the next, masked before grouping. Ordered:
 * the first that matches the whole word wins.
 */
const VARIABLE_WORDS: readonly RegExp[] = [
  /REDACTED/, // what redact() replaced, alone (`[REDACTED_KEY]`) or as a value (`password=[REDACTED]`)
  /^["'`].*["'`]$/, // a quoted value
  /^[a-z][a-z0-9+.-]*:\/\/\S+$/i, // a URL
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, // a UUID
  /^(?:[a-z0-9-]+\.)+[a-z]{2,}(?::\d+)?$/i, // a host name
  /^\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?$/, // an IPv4 address
  /^[-+]?\d[\d.,:_]*[a-z%]{0,3}$/i, // a number, a time, a size (`30s`, `1.5MB`, `12:00`, `80%`)
  /^(?=[a-z_-]*\d)[a-z0-9_-]{12,}$/i, // a long id with digits (`req_8f3a9c2b1d`)
  /^[0-9a-f]{8,}$/i, // a hash
];

/**
 * Punctuation around a word that is not part of it: `(429)`, `limit,`, `"x".` The trailing run
 * starts only where a run starts (the lookbehind): a long run is scanned once, not once per
 * character of it.
 */
const EDGE = /^[([{<]+|(?<![)\]}>,;:.!?])[)\]}>,;:.!?]+$/g;

/** The words of `text`, variable ones masked. */
export function templateWords(text: string): string[] {
  const words: string[] = [];
  for (const raw of text.split(/\s+/)) {
    if (raw === "") continue;
    // A token of punctuation alone (`-`, `...`, `:`) stays a word: the rule of a template
    // matches its texts token by token.
    const word = raw.replace(EDGE, "") || raw;
    // A text cut by redaction ends in "…": its last word is a part, not a word the error has.
    if (word.endsWith("…")) {
      words.push(WILDCARD);
      continue;
    }
    words.push(VARIABLE_WORDS.some((re) => re.test(word)) ? WILDCARD : word);
  }
  return words;
}

/** Distinct texts whose words are remembered (the cache is emptied when full). */
const WORDS_CACHED = 1024;
/** Share of positions on which a text must agree with a template to join it. */
const SIMILARITY = 0.5;

/** One template and what joined it. */
export interface TemplateGroup {
  /** The template's words, `<*>` where its texts differ. */
  words: string[];
  count: number;
  firstAt: number;
  lastAt: number;
  /** The first few distinct texts, as they came. */
  examples: string[];
  /** Values shared by every text of the group (e.g. an HTTP status); dropped at the first that differs. */
  shared: Map<string, string | number>;
}

export interface MinerOptions {
  /** Distinct examples kept per template (default 3). */
  examples?: number;
  /** Templates kept (default 500); past that, a text that starts a new one is counted as left out. */
  maxTemplates?: number;
}

/**
 * Groups texts into templates as they come. Memory is bounded by `maxTemplates` and the
 * examples kept, whatever the number of texts.
 */
export class TemplateMiner {
  private readonly groups: TemplateGroup[] = [];
  /** Templates by word count and first word (the first layers of Drain's tree). */
  private readonly index = new Map<string, TemplateGroup[]>();
  private readonly maxExamples: number;
  private readonly maxTemplates: number;
  /** Texts that started a template after `maxTemplates` was reached: counted, not kept. */
  leftOut = 0;
  /** Words of the texts seen lately: a log repeats its texts, and cutting them is the costly part. */
  private readonly words = new Map<string, string[]>();

  constructor(options: MinerOptions = {}) {
    this.maxExamples = options.examples ?? 3;
    this.maxTemplates = options.maxTemplates ?? 500;
  }

  /**
   * Adds one text seen at `at` (epoch ms), with values to keep when every text shares them.
   * Returns its template (undefined: left out, past `maxTemplates`).
   */
  add(
    text: string,
    at: number,
    facts: Record<string, string | number | undefined> = {},
  ): TemplateGroup | undefined {
    const words = this.wordsOf(text);
    const key = `${words.length} ${words[0] ?? ""}`;
    let bucket = this.index.get(key);
    if (!bucket) this.index.set(key, (bucket = []));
    let group = best(bucket, words);
    if (!group) {
      if (this.groups.length >= this.maxTemplates) {
        this.leftOut++;
        return undefined;
      }
      group = { words, count: 0, firstAt: at, lastAt: at, examples: [], shared: new Map() };
      for (const [name, value] of Object.entries(facts))
        if (value !== undefined) group.shared.set(name, value);
      bucket.push(group);
      this.groups.push(group);
    } else {
      // A new list only when a word turns wild: most texts fit their template as it is.
      if (group.words.some((w, i) => w !== words[i] && w !== WILDCARD))
        group.words = group.words.map((w, i) => (w === words[i] ? w : WILDCARD));
      for (const [name, value] of group.shared)
        if (facts[name] !== value) group.shared.delete(name);
    }
    group.count++;
    group.firstAt = Math.min(group.firstAt, at);
    group.lastAt = Math.max(group.lastAt, at);
    if (group.examples.length < this.maxExamples && !group.examples.includes(text))
      group.examples.push(text);
    return group;
  }

  private wordsOf(text: string): string[] {
    let words = this.words.get(text);
    if (words === undefined) {
      if (this.words.size >= WORDS_CACHED) this.words.clear();
      words = templateWords(text);
      this.words.set(text, words);
    }
    return words;
  }

  /** The templates, the most frequent first (ties: the first seen first). */
  templates(): TemplateGroup[] {
    return this.groups
      .map((g, order) => ({ g, order }))
      .sort((a, b) => b.g.count - a.g.count || a.order - b.order)
      .map(({ g }) => g);
  }
}

/** The template of `bucket` that agrees most with `words`, if one agrees enough. */
function best(
  bucket: readonly TemplateGroup[],
  words: readonly string[],
): TemplateGroup | undefined {
  let found: TemplateGroup | undefined;
  let bestScore = -1;
  for (const group of bucket) {
    let same = 0;
    for (let i = 0; i < words.length; i++) if (group.words[i] === words[i]) same++;
    const score = words.length === 0 ? 1 : same / words.length;
    if (score >= SIMILARITY && score > bestScore) {
      found = group;
      bestScore = score;
    }
  }
  return found;
}

/** Characters with a meaning in a regex, escaped. */
const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");

/** What EDGE strips around a word, as regex classes: any of them may stand there in a text. */
const LEADING = "[([{<]*";
const TRAILING = "[)\\]}>,;:.!?]*";

/**
 * A regex source matching the texts of a template, token by token: its fixed words in order
 * (with the punctuation EDGE strips around them), each `<*>` any one token (`\S+`), tokens
 * apart by `\s+`. Linear by construction: every repeated piece is followed by one that cannot
 * start with what it repeats (`\s` against `\S`, a word against the punctuation EDGE took off
 * it), so a text is read once per place the first word matches (checked by recheck in the suite).
 */
export function templateRegex(words: readonly string[]): string {
  // Leading and trailing wildcards add nothing to a search that is not anchored.
  let from = 0;
  let to = words.length;
  while (from < to && words[from] === WILDCARD) from++;
  while (to > from && words[to - 1] === WILDCARD) to--;
  const kept = words.slice(from, to);
  return kept
    .map((w, i) => {
      if (w === WILDCARD) return "\\S+";
      const literal = escapeRegex(w);
      // A word of punctuation alone was not stripped: it stands as it is.
      if (w.replace(EDGE, "") === "") return literal;
      return `${i > 0 ? LEADING : ""}${literal}${i < kept.length - 1 ? TRAILING : ""}`;
    })
    .join("\\s+");
}
