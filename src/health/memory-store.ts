import {
  DEFAULT_WINDOWS,
  failedAttempts,
  type AgentSignals,
  type CallRecord,
  type ScopeSignals,
  type SignalStore,
  type SignalWindows,
  type TaskRecord,
} from "./store.js";
import { addTotals, emptyTotals, OutcomeRing, RollingWindow } from "./window.js";

/** Tools tracked per agent before further names share one slot, so hostile names cannot grow memory. */
export const MAX_TOOLS_PER_AGENT = 1_000;
/** Name under which calls of tools past the limit are counted. */
export const OVERFLOW_TOOL = "_other";

interface ToolState {
  calls: RollingWindow;
  llm: OutcomeRing;
}

interface AgentState {
  tools: Map<string, ToolState>;
  llm: OutcomeRing;
  tasks: RollingWindow;
}

/** The in-process signal store: constant memory per tool, no server. */
export class MemorySignalStore implements SignalStore {
  readonly windows: SignalWindows;
  private readonly agents = new Map<string, AgentState>();
  /** The scope of the last call recorded: calls of one tool in a row skip two map lookups. */
  private last:
    { agentName: string; toolName: string; agent: AgentState; tool: ToolState } | undefined;

  constructor(windows: Partial<SignalWindows> = {}) {
    this.windows = { ...DEFAULT_WINDOWS, ...windows };
  }

  recordCall(record: CallRecord, now: number): void {
    const ok = record.outcome === "success" || record.outcome === "recovered" ? 1 : 0;
    const failed = failedAttempts(record);
    // Blocked calls and calls failed fast by an open circuit reached no dependency: no signal.
    if (ok + failed === 0) return;
    let last = this.last;
    if (last?.agentName !== record.agent || last.toolName !== record.tool) {
      const agent = this.agent(record.agent);
      last = this.last = {
        agentName: record.agent,
        toolName: record.tool,
        agent,
        tool: this.tool(agent, record.tool),
      };
    }
    const { agent, tool } = last;
    tool.calls.add(now, ok, failed, record.durationMs);
    if (record.empty !== undefined) {
      tool.llm.add(record.empty);
      agent.llm.add(record.empty);
    }
  }

  recordTask(record: TaskRecord, now: number): void {
    const completed = record.outcome === "completed";
    this.agent(record.agent).tasks.add(now, completed ? 1 : 0, completed ? 0 : 1);
  }

  read(agentName: string, now: number): AgentSignals {
    const agent = this.agent(agentName);
    const total = emptyTotals();
    const recentTotal = { ok: 0, failed: 0 };
    const tools = new Map<string, ScopeSignals>();
    for (const [name, tool] of agent.tools) {
      const calls = tool.calls.totals(now);
      addTotals(total, calls);
      const llm = tool.llm.counts();
      const recent = tool.calls.totals(now, this.windows.recentWindowMs);
      recentTotal.ok += recent.ok;
      recentTotal.failed += recent.failed;
      tools.set(name, {
        calls,
        recent: { ok: recent.ok, failed: recent.failed },
        llm: { total: llm.total, empty: llm.hits },
        tasks: { completed: 0, failed: 0 },
      });
    }
    const llm = agent.llm.counts();
    const tasks = agent.tasks.totals(now);
    return {
      agent: {
        calls: total,
        recent: recentTotal,
        llm: { total: llm.total, empty: llm.hits },
        tasks: { completed: tasks.ok, failed: tasks.failed },
      },
      tools,
    };
  }

  /** Numbers held for `agent`: constant whatever the number of calls (a test checks it). */
  footprint(agentName: string): number {
    const agent = this.agents.get(agentName);
    if (!agent) return 0;
    let n = agent.tasks.footprint + agent.llm.size;
    for (const tool of agent.tools.values()) n += tool.calls.footprint + tool.llm.size;
    return n;
  }

  private agent(name: string): AgentState {
    let state = this.agents.get(name);
    if (!state) {
      state = {
        tools: new Map(),
        llm: new OutcomeRing(this.windows.llmSampleSize),
        tasks: new RollingWindow({
          windowMs: this.windows.taskWindowMs,
          buckets: this.windows.buckets,
          latency: false,
        }),
      };
      this.agents.set(name, state);
    }
    return state;
  }

  private tool(agent: AgentState, name: string): ToolState {
    let state = agent.tools.get(name);
    if (state) return state;
    if (agent.tools.size >= MAX_TOOLS_PER_AGENT && name !== OVERFLOW_TOOL) {
      return this.tool(agent, OVERFLOW_TOOL);
    }
    state = {
      calls: new RollingWindow({
        windowMs: this.windows.callWindowMs,
        buckets: this.windows.buckets,
        latency: true,
      }),
      llm: new OutcomeRing(this.windows.llmSampleSize),
    };
    agent.tools.set(name, state);
    return state;
  }
}
