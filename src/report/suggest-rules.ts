/**
 * `selfheal report --suggest-rules`: the UNKNOWN error texts of a log, grouped into templates
 * (templates.ts), each proposed as a diagnosis rule with its evidence. Deterministic: a table of
 * statuses and wordings, no model. The rules come out as a rule file that
 * `createSelfHealing({ diagnosis: { ruleFile } })` loads (src/diagnosis/rule-file.ts).
 */
import { compileLinear, MAX_MATCH_COST } from "../diagnosis/linear-regex.js";
import { DEFAULT_CHAINS, type PlanStep } from "../diagnosis/rules.js";
import type { Pattern } from "../telemetry/conventions.js";
import { TemplateMiner, templateRegex, type TemplateGroup } from "./templates.js";

/** Where a proposal's pattern came from: the HTTP status or error code the samples share, or wording. */
export type EvidenceTier = "structured" | "wording";

/** A rule as the rule file holds it: regexes as strings (compiled case-insensitive). */
export interface RuleFileRule {
  name: string;
  pattern: Pattern;
  confidence: number;
  match: { status?: number[]; code?: string[]; message: string[] };
  /** Why the rule is proposed; read by people, ignored by the loader. */
  evidence?: RuleEvidence;
}

export interface RuleEvidence {
  tier: EvidenceTier;
  /** What named the pattern: `status 429`, `code quota_exceeded`, `wording "quota"`. */
  because: string;
  samples: number;
  firstSeen: string;
  lastSeen: string;
  /** Redacted examples, as logged. */
  examples: string[];
  tools: string[];
  /** The chain the pattern runs (the rule leaves it to the pattern's default). */
  strategies: readonly PlanStep[];
  /** Of the samples, how many the recovery still answered, and with which strategy. */
  recovered: number;
  recoveredBy: Record<string, number>;
}

/** The rule file: `version` 1. */
export interface RuleFile {
  version: 1;
  /** What wrote it, and from which period. */
  source: string;
  rules: RuleFileRule[];
}

/** A template with no pattern to propose: for a person to read. */
export interface Unclassified {
  template: string;
  samples: number;
  examples: string[];
}

export interface RuleSuggestions {
  file: RuleFile;
  unclassified: Unclassified[];
  /** UNKNOWN texts read, and those not grouped (past the miner's bound). */
  texts: number;
  leftOut: number;
}

/** Statuses that name a pattern (as the default rules read them). */
function patternOfStatus(status: number): Pattern | undefined {
  if (status === 429) return "RATE_LIMIT";
  if (status === 408) return "TIMEOUT"; // 504 is the gateway's: SERVICE_DOWN, as the defaults
  if (status === 401 || status === 403) return "AUTH";
  if (status === 413) return "CONTEXT_LENGTH";
  if (status === 400 || status === 404 || status === 422) return "BAD_REQUEST";
  if (status >= 500 && status <= 599) return "SERVICE_DOWN";
  return undefined;
}

/**
 * Wordings that name a pattern, first match wins: the vocabulary providers use for each. Broader
 * than the default rules on purpose: here a person reviews the proposal before it runs.
 */
const WORDING: readonly [RegExp, Pattern][] = [
  [/\bcontext\b|too long|maximum .{0,20}tokens|token limit/i, "CONTEXT_LENGTH"],
  [
    /rate.?limit|too many requests|quota|throttl|slow down|per (?:second|minute|hour|day)|this (?:second|minute|hour)|budget/i,
    "RATE_LIMIT",
  ],
  [/timed? ?out|timeout|deadline/i, "TIMEOUT"],
  [/unauthori[sz]ed|forbidden|api.?key|credential|permission|not allowed/i, "AUTH"],
  [/content.?policy|safety|moderation|flagged/i, "CONTENT_POLICY"],
  [/\bjson\b|unexpected token|could not parse|parse error/i, "JSON_PARSE_ERROR"],
  [/empty (?:response|answer|completion|reply)/i, "EMPTY_LLM_RESPONSE"],
  [/invalid|malformed|bad request|unsupported|missing required/i, "BAD_REQUEST"],
  [
    /unavailable|overload|\bdown\b|refused|reset|bad gateway|internal.{0,8}error|maintenance|try again later|busy/i,
    "SERVICE_DOWN",
  ],
];

/** Codes that name a pattern, by wording of the code itself. */
const patternOfCode = (code: string): Pattern | undefined =>
  WORDING.find(([re]) => re.test(code.replace(/[_-]/g, " ")))?.[1];

/** Most tokens a proposed rule spells out: the first words tell an error, and run cheaper. */
const MAX_RULE_WORDS = 16;

/**
 * The regex of a template as a rule file holds it, and its cost in the linear engine
 * (MAX_MATCH_COST): the template's first words, as many as the engine takes (its DFA built at
 * load; `undefined`: none).
 */
function ruleRegex(words: readonly string[]): { source: string; cost: number } | undefined {
  for (let n = Math.min(words.length, MAX_RULE_WORDS); n > 0; n--) {
    const source = templateRegex(words.slice(0, n));
    if (source === "") return undefined;
    const linear = compileLinear(new RegExp(source, "i"));
    if (!("reason" in linear)) return { source, cost: linear.cost };
  }
  return undefined;
}

/** Confidence of a proposed rule: structured evidence acts beyond the call, wording does not. */
const CONFIDENCE: Record<EvidenceTier, number> = { structured: 0.8, wording: 0.6 };

/** One UNKNOWN recovery, as the log has it. */
export interface UnknownSample {
  at: number;
  tool: string;
  /** Redacted error text. */
  error: string;
  status?: number | undefined;
  code?: string | undefined;
  outcome: string;
  strategy?: string | undefined;
}

/** Tallies beside each template: the tools and outcomes of its samples. */
interface Tally {
  tools: Set<string>;
  recovered: number;
  recoveredBy: Map<string, number>;
}

/** Tools named per proposal. */
const MAX_TOOLS = 10;

/** Collects UNKNOWN samples, then proposes rules; memory bounded by the miner's. */
export class RuleSuggester {
  private readonly miner = new TemplateMiner();
  private readonly tallies = new Map<TemplateGroup, Tally>();
  private texts = 0;

  /** `error`: the text to group, when not `s.error` (the event's raw text, redacted). */
  add(s: UnknownSample, error = s.error): void {
    this.texts++;
    const group = this.miner.add(error, s.at, { status: s.status, code: s.code });
    if (!group) return;
    let t = this.tallies.get(group);
    if (!t)
      this.tallies.set(group, (t = { tools: new Set(), recovered: 0, recoveredBy: new Map() }));
    if (t.tools.size < MAX_TOOLS) t.tools.add(s.tool);
    if (s.outcome === "recovered") {
      t.recovered++;
      if (s.strategy !== undefined)
        t.recoveredBy.set(s.strategy, (t.recoveredBy.get(s.strategy) ?? 0) + 1);
    }
  }

  /** The proposals, the most frequent first; `source` is written into the file. */
  suggest(source: string): RuleSuggestions {
    const rules: RuleFileRule[] = [];
    const unclassified: Unclassified[] = [];
    const names = new Map<string, number>();
    // Proposals stop where the file would be refused: its regexes together past the loader's bound.
    let cost = 0;
    for (const group of this.miner.templates()) {
      const template = group.words.join(" ");
      const status = group.shared.get("status");
      const code = group.shared.get("code");
      const named = this.name(group, status, code);
      const regex = named && ruleRegex(group.words);
      if (!named || !regex || cost + regex.cost > MAX_MATCH_COST) {
        unclassified.push({ template, samples: group.count, examples: group.examples });
        continue;
      }
      cost += regex.cost;
      const message = regex.source;
      const { pattern, tier, because } = named;
      const slug = pattern.toLowerCase().replace(/_/g, "-");
      const n = (names.get(slug) ?? 0) + 1;
      names.set(slug, n);
      const tally = this.tallies.get(group);
      rules.push({
        name: `suggested-${slug}-${n}`,
        pattern,
        confidence: CONFIDENCE[tier],
        match: {
          ...(typeof status === "number" && { status: [status] }),
          ...(typeof code === "string" && { code: [code] }),
          message: [message],
        },
        evidence: {
          tier,
          because,
          samples: group.count,
          firstSeen: new Date(group.firstAt).toISOString(),
          lastSeen: new Date(group.lastAt).toISOString(),
          examples: group.examples,
          tools: [...(tally?.tools ?? [])].sort(),
          strategies: DEFAULT_CHAINS[pattern],
          recovered: tally?.recovered ?? 0,
          recoveredBy: Object.fromEntries(
            [...(tally?.recoveredBy ?? [])].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])),
          ),
        },
      });
    }
    return {
      file: { version: 1, source, rules },
      unclassified,
      texts: this.texts,
      leftOut: this.miner.leftOut,
    };
  }

  /** The pattern a template's evidence names: a shared status, a shared code, then its wording. */
  private name(
    group: TemplateGroup,
    status: string | number | undefined,
    code: string | number | undefined,
  ): { pattern: Pattern; tier: EvidenceTier; because: string } | undefined {
    const byStatus = typeof status === "number" ? patternOfStatus(status) : undefined;
    if (byStatus) return { pattern: byStatus, tier: "structured", because: `status ${status}` };
    const byCode = typeof code === "string" ? patternOfCode(code) : undefined;
    if (byCode) return { pattern: byCode, tier: "structured", because: `code ${code}` };
    const text = group.words.join(" ");
    for (const [re, pattern] of WORDING) {
      const found = re.exec(text);
      if (found) return { pattern, tier: "wording", because: `wording "${found[0]}"` };
    }
    return undefined;
  }
}
