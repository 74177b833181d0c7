/**
 * `selfheal report --suggest-thresholds`: health thresholds per tool and stall limits per
 * watchdog stage, proposed from what the log shows the agents doing. Deterministic: the period's
 * calls (the engine's per-minute rollup lines) are cut into the health signal's 10-minute
 * windows, and each setting is replayed over them, the current one (from the log's `thresholds`
 * and watchdog `limits` lines, else the defaults) and the proposed one, counting the windows with
 * incidents each would have flagged and the quiet windows (no incident in or next to them) it
 * would have raised false alarms on. A setting is proposed only where it does better.
 *
 * Here, the tally that reads the log and makes the proposals: the lines are checked in
 * threshold-lines.ts, the windows kept in call-windows.ts, each proposal made in
 * threshold-advice.ts.
 */
import {
  DEFAULT_BASELINE_TAU_MS,
  DEFAULT_THRESHOLDS,
  type HealthThresholds,
  type ThresholdOverrides,
} from "../health/thresholds.js";
import { Buckets } from "../telemetry/log-buckets.js";
import {
  advance,
  ClosedWindows,
  closeWindows,
  DenseBuckets,
  foldWindow,
  markQuiet,
  windowOf,
  type Judged,
  type ToolTally,
} from "./call-windows.js";
import {
  AGENT_SCOPE,
  EMPTY_RATE,
  latencyAdvice,
  rateAdvice,
  stageAdvice,
  SUCCESS_RATE,
  type Limits,
  type SignalAdvice,
  type StageAdvice,
} from "./threshold-advice.js";
import { num, readThresholds, type CallsCounts } from "./threshold-lines.js";

/** Tools (agent and tool) tallied; calls of others are counted, not judged. */
const MAX_TOOLS = 500;
/** Stages (agent and stage) tallied. */
const MAX_STAGES = 200;

export interface ThresholdSuggestions {
  /** Per tool and signal, tools in name order. */
  signals: SignalAdvice[];
  stages: StageAdvice[];
  /** The fragments to paste, per agent: `createSelfHealing({ agent, health })`. */
  health: Record<string, ThresholdOverrides & { tools?: Record<string, ThresholdOverrides> }>;
  /** `Supervisor({ limits: { stageStallMs } })`, per agent. */
  watchdog: Record<string, { stageStallMs: Record<string, number> }>;
  /** Rollup lines read; tools and stages past the bound (counted, not judged). */
  rollups: number;
  untracked: number;
}

interface Settings {
  at: number;
  thresholds: HealthThresholds;
  tools: Record<string, HealthThresholds>;
  tauMs: number;
}

/** The tally of rollups, settings and incidents, and the proposals made from it. */
export class ThresholdTally {
  /** By agent, then tool (two maps: no key to build per line). */
  private readonly tools = new Map<string, Map<string, ToolTally>>();
  private tracked = 0;
  private readonly stages = new Map<string, { agent: string; stage: string; durations: Buckets }>();
  private readonly settings = new Map<string, Settings>();
  private readonly limits = new Map<string, Limits>();
  private rollups = 0;
  private untracked = 0;

  private tool(agent: string, tool: string): ToolTally | undefined {
    let byTool = this.tools.get(agent);
    if (!byTool) this.tools.set(agent, (byTool = new Map<string, ToolTally>()));
    let t = byTool.get(tool);
    if (!t) {
      if (this.tracked >= MAX_TOOLS) return undefined;
      this.tracked++;
      t = {
        agent,
        tool,
        open: new Map(),
        closed: new ClosedWindows(),
        pending: new Set(),
        newest: -Infinity,
        spare: [],
        called: false,
      };
      byTool.set(tool, t);
    }
    return t;
  }

  /** A `calls` line (checked by callsProblem, or read by readCallsLine). */
  addCalls(c: CallsCounts, latency: Readonly<Record<string, number>> | string): void {
    this.rollups++;
    const t = this.tool(c.agent, c.tool);
    if (!t) {
      this.untracked++;
      return;
    }
    const start = windowOf(c.at);
    advance(t, start);
    t.called = true;
    let w = t.open.get(start);
    if (!w) {
      const latency = t.spare.pop() ?? new DenseBuckets();
      t.open.set(start, (w = { ok: 0, failed: 0, llm: 0, empty: 0, latency }));
    }
    w.ok += c.ok;
    w.failed += c.failed;
    w.llm += c.llm;
    w.empty += c.empty;
    const buckets = w.latency;
    if (typeof latency !== "string")
      for (const [bucket, n] of Object.entries(latency)) buckets.add(Number(bucket), n);
    else buckets.addText(latency);
  }

  /** An incident of `tool` at `at`: its window is one the thresholds should flag. */
  addIncident(agent: string, tool: string, at: number): void {
    const t = this.tool(agent, tool);
    if (!t) return;
    const start = windowOf(at);
    advance(t, start);
    t.pending.add(start);
  }

  /** A `thresholds` line: the latest one per agent is the setting in effect. */
  addSettings(e: Record<string, unknown>): void {
    const agent = e.agent as string;
    const at = e.at as number;
    if ((this.settings.get(agent)?.at ?? -Infinity) > at) return;
    const thresholds = readThresholds(e.thresholds, DEFAULT_THRESHOLDS);
    const tools: Record<string, HealthThresholds> = {};
    for (const [name, value] of Object.entries(
      (e.tools as Record<string, unknown> | undefined) ?? {},
    ))
      tools[name] = readThresholds(value, thresholds);
    const tauMs = num(e.baselineTauMs, DEFAULT_BASELINE_TAU_MS) ?? DEFAULT_BASELINE_TAU_MS;
    this.settings.set(agent, { at, thresholds, tools, tauMs });
  }

  /** A watchdog `steps` line (checked by stepsProblem). */
  addSteps(e: Record<string, unknown>): void {
    this.rollups++;
    const key = JSON.stringify([e.agent, e.stage]);
    let s = this.stages.get(key);
    if (!s) {
      if (this.stages.size >= MAX_STAGES) {
        this.untracked++;
        return;
      }
      s = { agent: e.agent as string, stage: e.stage as string, durations: new Buckets() };
      this.stages.set(key, s);
    }
    s.durations.addEncoded(e.durationsMs as Record<string, number>);
  }

  /** A watchdog `limits` line: the latest one per agent is the setting in effect. */
  addLimits(e: Record<string, unknown>): void {
    const agent = e.agent as string;
    const at = e.at as number;
    if ((this.limits.get(agent)?.at ?? -Infinity) > at) return;
    const stage: Record<string, number> = {};
    for (const [name, v] of Object.entries(
      (e.stageStallMs as Record<string, unknown> | undefined) ?? {},
    ))
      if (typeof v === "number" && v > 0) stage[name] = v;
    this.limits.set(agent, { at, stallMs: e.stallMs as number, stageStallMs: stage });
  }

  suggest(): ThresholdSuggestions {
    const signals: SignalAdvice[] = [];
    const health: ThresholdSuggestions["health"] = {};
    const sorted = [...this.tools.values()]
      .flatMap((byTool) => [...byTool.values()])
      .filter((t) => t.called)
      .sort((a, b) => a.agent.localeCompare(b.agent) || a.tool.localeCompare(b.tool));
    const byAgent = new Map<string, ToolTally[]>();
    for (const t of sorted) {
      const list = byAgent.get(t.agent);
      if (list) list.push(t);
      else byAgent.set(t.agent, [t]);
    }
    const add = (advice: SignalAdvice | undefined, into: ThresholdOverrides, list = signals) => {
      if (!advice) return;
      list.push(advice);
      for (const [group, values] of Object.entries(advice.overrides ?? {}))
        Object.assign(((into as Record<string, object>)[group] ??= {}), values);
    };
    for (const [agent, tools] of byAgent) {
      const settings = this.settings.get(agent);
      const agentThresholds = settings?.thresholds ?? DEFAULT_THRESHOLDS;
      // One tool's windows at a time (a month of them for hundreds of tools would not be small),
      // summed by window start into the agent's own as they go.
      const merged = new Map<number, Judged>();
      const toolSignals: SignalAdvice[] = [];
      const toolOverrides: Record<string, ThresholdOverrides> = {};
      for (const t of tools) {
        closeWindows(t, Infinity);
        const windows = t.closed.judged();
        for (const w of windows) {
          const m = merged.get(w.at);
          if (m) foldWindow(m, w);
          else merged.set(w.at, { ...w });
        }
        const thresholds = settings?.tools[t.tool] ?? agentThresholds;
        const tau = settings?.tauMs ?? DEFAULT_BASELINE_TAU_MS;
        const tool = { agent, tool: t.tool, scope: "tool" as const };
        const overrides: ThresholdOverrides = {};
        add(rateAdvice(tool, windows, thresholds, SUCCESS_RATE), overrides, toolSignals);
        add(rateAdvice(tool, windows, thresholds, EMPTY_RATE), overrides, toolSignals);
        add(latencyAdvice(t, windows, thresholds, tau), overrides, toolSignals);
        if (Object.keys(overrides).length) toolOverrides[t.tool] = overrides;
      }
      // The agent's own rates, first: its tools' calls together, judged on its thresholds.
      const own: ThresholdSuggestions["health"][string] = {};
      const scope = { agent, tool: AGENT_SCOPE, scope: "agent" as const };
      const agentWindows = [...merged.values()].sort((a, b) => a.at - b.at);
      markQuiet(agentWindows);
      add(rateAdvice(scope, agentWindows, agentThresholds, SUCCESS_RATE), own);
      add(rateAdvice(scope, agentWindows, agentThresholds, EMPTY_RATE), own);
      signals.push(...toolSignals);
      if (Object.keys(toolOverrides).length) own.tools = toolOverrides;
      if (Object.keys(own).length) health[agent] = own;
    }
    const stages: StageAdvice[] = [];
    const watchdog: ThresholdSuggestions["watchdog"] = {};
    for (const s of [...this.stages.values()].sort(
      (a, b) => a.agent.localeCompare(b.agent) || a.stage.localeCompare(b.stage),
    )) {
      const advice = stageAdvice(s.agent, s.stage, s.durations, this.limits.get(s.agent));
      stages.push(advice);
      if (advice.suggestedMs !== undefined)
        (watchdog[s.agent] ??= { stageStallMs: {} }).stageStallMs[s.stage] = advice.suggestedMs;
    }
    return { signals, stages, health, watchdog, rollups: this.rollups, untracked: this.untracked };
  }
}
