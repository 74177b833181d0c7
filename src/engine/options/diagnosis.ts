import { SelfHealConfigError } from "../../errors.js";
import { DEFAULT_ADVICE_TIMEOUT_MS, type EscalateUnknown } from "../../diagnosis/advisor.js";
import { DEFAULT_DRIFT, type DriftOptions } from "../../diagnosis/drift.js";
import {
  compileRules,
  DEFAULT_RULES,
  type CompiledRule,
  type Rule,
} from "../../diagnosis/rules.js";
import { readRuleFile } from "../../diagnosis/rule-file.js";
import {
  DEFAULT_STATUS_PAGE_CACHE_MS,
  DEFAULT_STATUS_PAGE_TIMEOUT_MS,
} from "../../diagnosis/status-page.js";
import {
  knownKeys,
  ms,
  numberGroup,
  numbers,
  optionalFunction,
  optionalObject,
  show,
  type NumberRule,
  type Plain,
} from "./validate.js";

export interface DiagnosisOptions {
  /**
   * The rule table, first match wins: a list replaces the defaults; a function receives the
   * defaults and returns the table (to add, replace or reorder rules).
   */
  rules?: readonly Rule[] | ((defaults: readonly Rule[]) => readonly Rule[]);
  /**
   * Rule files (JSON, as `selfheal report --suggest-rules` writes them), read once here: their
   * rules go after the table, for the errors it does not know.
   */
  ruleFile?: string | readonly string[];
  /** Statuspage root URL by tool or provider name, e.g. `{ openai: "https://status.openai.com" }`. */
  statusPages?: Record<string, string>;
  /** Per status page request, ms (default 2000). */
  statusPageTimeoutMs?: number;
  /** How long a status page answer is reused, ms (default 30 s). */
  statusPageCacheMs?: number;
  /** UNKNOWN share watch: `threshold` (0.05), `window` (100), `minSamples` (20), `keepSamples` (20). */
  drift?: Partial<DriftOptions>;
  /** Optional second opinion on UNKNOWN errors (an LLM, say): advisory, off the call path. */
  escalateUnknown?: EscalateUnknown;
  /** Time box of `escalateUnknown`, ms (default 5000). */
  escalateTimeoutMs?: number;
  /** The fetch status pages are read with (default the global one; the simulator fakes it). */
  fetch?: typeof fetch;
}

/** The diagnosis options after validation, spread into the resolved options as they are. */
export interface ResolvedDiagnosis {
  rules: CompiledRule[];
  statusPages: Record<string, string>;
  statusPageTimeoutMs: number;
  statusPageCacheMs: number;
  drift: DriftOptions;
  escalateUnknown: EscalateUnknown | undefined;
  escalateTimeoutMs: number;
  statusPageFetch: typeof fetch | undefined;
}

const DIAGNOSIS_KEYS = [
  "rules",
  "ruleFile",
  "statusPages",
  "statusPageTimeoutMs",
  "statusPageCacheMs",
  "drift",
  "escalateUnknown",
  "escalateTimeoutMs",
  "fetch",
] as const satisfies readonly (keyof DiagnosisOptions)[];

const TIMING_RULES = {
  statusPageTimeoutMs: ms(1),
  statusPageCacheMs: ms(1),
  escalateTimeoutMs: ms(1),
};

/** In the order of DEFAULT_DRIFT's keys, which the "known:" list of messages shows. */
const DRIFT_RULES = {
  threshold: { min: 0, max: 1 },
  window: { min: 1, max: 100_000, integer: true },
  minSamples: { min: 1, max: 100_000, integer: true },
  keepSamples: { min: 1, max: 100_000, integer: true },
} satisfies Record<keyof DriftOptions, NumberRule>;

/** The table as given: a function is called with the defaults here, once. */
function ruleTable(rules: unknown): unknown {
  if (typeof rules === "function")
    return (rules as (defaults: readonly Rule[]) => unknown)(DEFAULT_RULES);
  return rules === undefined ? DEFAULT_RULES : rules; // null goes on, for compileRules to refuse
}

/** The table, then the rules of each rule file, in order. */
function withRuleFiles(table: unknown, ruleFile: unknown): unknown {
  if (ruleFile === undefined) return table;
  const paths = typeof ruleFile === "string" ? [ruleFile] : ruleFile;
  if (!Array.isArray(paths) || !paths.every((p) => typeof p === "string" && p !== ""))
    throw new SelfHealConfigError(
      "diagnosis.ruleFile",
      `expected a path or a list of paths, got ${show(ruleFile)}`,
    );
  const fromFiles = paths.flatMap((path: string) => {
    const rules = readRuleFile(path);
    try {
      compileRules(rules); // alone first: a bad rule is named with its file
    } catch (error) {
      if (!(error instanceof SelfHealConfigError)) throw error;
      throw new SelfHealConfigError(
        "diagnosis.ruleFile",
        `${path}: ${error.message.replace(/^selfheal: invalid option /, "")}`,
      );
    }
    return rules;
  });
  return Array.isArray(table) ? [...(table as unknown[]), ...fromFiles] : table;
}

function statusPages(value: unknown): Record<string, string> {
  const pages = optionalObject(value, "diagnosis.statusPages");
  for (const [key, url] of Object.entries(pages)) {
    const field = `diagnosis.statusPages.${key}`;
    if (typeof url !== "string" || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new SelfHealConfigError(field, `expected an http(s) URL, got ${show(url)}`);
    }
  }
  return pages as Record<string, string>;
}

export function resolveDiagnosis(input: unknown): ResolvedDiagnosis {
  const d = optionalObject(input, "diagnosis");
  knownKeys(d, DIAGNOSIS_KEYS, "diagnosis");
  const rules = withRuleFiles(ruleTable(d.rules), d.ruleFile);
  const pages = statusPages(d.statusPages);
  numbers(d, TIMING_RULES, "diagnosis");
  const drift: Plain = numberGroup(d.drift, DRIFT_RULES, "diagnosis.drift");
  optionalFunction(d.escalateUnknown, "diagnosis.escalateUnknown");
  optionalFunction(d.fetch, "diagnosis.fetch");
  return {
    rules: compileRules(rules),
    statusPages: pages,
    statusPageTimeoutMs:
      (d.statusPageTimeoutMs as number | undefined) ?? DEFAULT_STATUS_PAGE_TIMEOUT_MS,
    statusPageCacheMs: (d.statusPageCacheMs as number | undefined) ?? DEFAULT_STATUS_PAGE_CACHE_MS,
    drift: { ...DEFAULT_DRIFT, ...(drift as Partial<DriftOptions>) },
    escalateUnknown: d.escalateUnknown as EscalateUnknown | undefined,
    escalateTimeoutMs: (d.escalateTimeoutMs as number | undefined) ?? DEFAULT_ADVICE_TIMEOUT_MS,
    statusPageFetch: d.fetch as typeof fetch | undefined,
  };
}
