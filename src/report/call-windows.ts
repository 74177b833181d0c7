/**
 * The call windows `--suggest-thresholds` replays settings over: each tool's calls (the engine's
 * per-minute rollup lines) summed into the health signal's 10-minute windows, held open with a
 * latency histogram until the log is past them, then closed into rows of numbers and read back in
 * time order, each marked incident or quiet.
 */
import { DEFAULT_WINDOWS } from "../health/store.js";
import { bucketPoint, MAX_BUCKET } from "../telemetry/log-buckets.js";

/** The health signal's call window: each window is judged as the evaluator would at its end. */
const WINDOW_MS = DEFAULT_WINDOWS.callWindowMs;
/**
 * Windows kept per tool: the latest 4 weeks (a proposal rests on the tool's recent behaviour, and
 * a year of log costs no more than a month).
 */
const WINDOWS_KEPT = (28 * 24 * 60 * 60_000) / WINDOW_MS;

/** One call window of one tool, summed from its minutes. */
interface Window {
  ok: number;
  failed: number;
  llm: number;
  empty: number;
  latency: DenseBuckets;
}

/**
 * An open window's latency histogram: one count per bucket in a typed array, reset and reused
 * once the window closes. A window a tool a minute would otherwise leave a histogram behind
 * each: garbage that made the heap (and the peak RSS) grow with the log.
 */
export class DenseBuckets {
  private readonly counts = new Uint32Array(MAX_BUCKET + 1);
  total = 0;

  add(bucket: number, n: number): void {
    this.counts[bucket] = (this.counts[bucket] ?? 0) + n;
    this.total += n;
  }

  /**
   * Adds each bucket and count of a `"57":3,"58":50` text (checked by CALLS_LINE): a loop over
   * its characters, no match object per pair.
   */
  addText(text: string): void {
    let bucket = 0;
    let count = 0;
    let inKey = true;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c >= 48 && c <= 57) {
        if (inKey) bucket = bucket * 10 + c - 48;
        else count = count * 10 + c - 48;
      } else if (c === 58) inKey = false;
      else if (c === 44) {
        this.add(bucket, count);
        bucket = count = 0;
        inKey = true;
      }
    }
    if (text.length > 0) this.add(bucket, count);
  }

  /** The nearest-rank q-quantile as its bucket's point, or null when empty. */
  quantile(q: number): number | null {
    if (this.total === 0) return null;
    const rank = Math.min(this.total, Math.max(1, Math.ceil(q * this.total)));
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return bucketPoint(i);
    }
    return null;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
  }
}

/** One window of one tool as the proposals read it, marked incident (one in it) or quiet. */
export interface Judged {
  at: number;
  ok: number;
  failed: number;
  llm: number;
  empty: number;
  /** Calls with a latency, and their P95 (ms). */
  calls: number;
  p95: number;
  incident: boolean;
  /** No incident in it nor in the windows next to it. */
  quiet: boolean;
}

/** A closed window's row: its columns, in order. */
const [AT, OK, FAILED, LLM, EMPTY, CALLS, P95, INCIDENT, WIDTH] = [
  0, 1, 2, 3, 4, 5, 6, 7, 8,
] as const;

/**
 * A tool's closed windows, the latest WINDOWS_KEPT, as rows of numbers in a ring: 64 bytes a
 * window and no object each. The rows live in a typed array, outside V8's heap: a heap that grows
 * with the log's length makes V8 leave more garbage between collections, so a month of log costs
 * far more than its windows (this keeps the review's peak memory flat).
 */
export class ClosedWindows {
  private rows = new Float64Array(64 * WIDTH);
  /** Rows written in all; the latest WINDOWS_KEPT are held. */
  private written = 0;

  push(at: number, w: Window | undefined, incident: boolean): void {
    const capacity = this.rows.length / WIDTH;
    if (this.written === capacity && capacity < WINDOWS_KEPT) {
      const grown = new Float64Array(Math.min(2 * capacity, WINDOWS_KEPT) * WIDTH);
      grown.set(this.rows);
      this.rows = grown;
    }
    const r = (this.written % (this.rows.length / WIDTH)) * WIDTH;
    const rows = this.rows;
    rows[r + AT] = at;
    rows[r + OK] = w?.ok ?? 0;
    rows[r + FAILED] = w?.failed ?? 0;
    rows[r + LLM] = w?.llm ?? 0;
    rows[r + EMPTY] = w?.empty ?? 0;
    rows[r + CALLS] = w?.latency.total ?? 0;
    rows[r + P95] = w?.latency.quantile(0.95) ?? 0;
    rows[r + INCIDENT] = incident ? 1 : 0;
    this.written++;
  }

  /**
   * The windows in time order. One closed twice (lines of another process's file, read after
   * it closed) is merged: counts summed, the larger P95.
   */
  judged(): Judged[] {
    const rows = this.rows;
    const held = Math.min(this.written, rows.length / WIDTH);
    const order = Array.from({ length: held }, (_, i) => i * WIDTH).sort(
      (a, b) => (rows[a + AT] ?? 0) - (rows[b + AT] ?? 0),
    );
    const out: Judged[] = [];
    for (const r of order) {
      const n = (col: number) => rows[r + col] ?? 0;
      const w = {
        at: n(AT),
        ok: n(OK),
        failed: n(FAILED),
        llm: n(LLM),
        empty: n(EMPTY),
        calls: n(CALLS),
        p95: n(P95),
        incident: n(INCIDENT) === 1,
      };
      const last = out.at(-1);
      if (last?.at === w.at) foldWindow(last, w);
      else out.push({ ...w, quiet: true });
    }
    markQuiet(out);
    return out;
  }
}

/**
 * One tool's tally. Windows stay open (a full latency histogram each) until the log is two
 * windows past them, then close into columns; incidents wait in `pending` for their window.
 */
export interface ToolTally {
  agent: string;
  tool: string;
  open: Map<number, Window>;
  closed: ClosedWindows;
  pending: Set<number>;
  /** The latest window start seen. */
  newest: number;
  /** Histograms of closed windows, for the next ones to open. */
  spare: DenseBuckets[];
  /** Whether any call was read (a tool with incidents only has nothing to judge). */
  called: boolean;
}

/** Closes the tool's windows that start before `before`, with the incidents waiting for them. */
export function closeWindows(t: ToolTally, before: number): void {
  for (const at of [...t.open.keys()].sort((a, b) => a - b)) {
    if (at >= before) continue;
    const w = t.open.get(at);
    t.closed.push(at, w, t.pending.delete(at));
    t.open.delete(at);
    if (w) {
      w.latency.reset();
      t.spare.push(w.latency);
    }
  }
  // An incident with no call in its window still makes its neighbours not quiet.
  for (const at of t.pending) {
    if (at >= before || t.open.has(at)) continue;
    t.closed.push(at, undefined, true);
    t.pending.delete(at);
  }
}

/** The log reached window `start`: windows two before it are closed. */
export function advance(t: ToolTally, start: number): void {
  if (start <= t.newest) return;
  t.newest = start;
  closeWindows(t, start - 2 * WINDOW_MS);
}

export const windowOf = (at: number) => Math.floor(at / WINDOW_MS) * WINDOW_MS;

/** Adds `w` into `into`, a window of the same start: counts summed, the larger P95. */
export function foldWindow(into: Judged, w: Omit<Judged, "quiet">): void {
  into.ok += w.ok;
  into.failed += w.failed;
  into.llm += w.llm;
  into.empty += w.empty;
  into.calls += w.calls;
  into.p95 = Math.max(into.p95, w.p95);
  into.incident ||= w.incident;
}

/** Marks each window quiet when no window next to it, nor it, had an incident. */
export function markQuiet(windows: Judged[]): void {
  const incidents = new Set(windows.filter((w) => w.incident).map((w) => w.at));
  for (const w of windows)
    w.quiet = ![w.at - WINDOW_MS, w.at, w.at + WINDOW_MS].some((x) => incidents.has(x));
}
