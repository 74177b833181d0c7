/**
 * Constant-memory rolling windows. Pure data: no clock, no I/O; callers pass `now`.
 *
 * A window is a ring of fixed time buckets (e.g. 60 x 10 s). Each bucket holds counts and, when
 * asked, a log-bucketed latency histogram. Memory does not grow with the call rate, and buckets
 * from many workers merge by plain addition, which is how a shared store combines them.
 */

/** Smallest latency the histogram tells apart, in ms. */
const LATENCY_MIN_MS = 0.1;
/** Each histogram bucket is 2^(1/4) (about 19%) wider than the one before. */
const LATENCY_GROWTH = 2 ** 0.25;
const LOG_GROWTH = Math.log(LATENCY_GROWTH);
/** Buckets from 0.1 ms to just over an hour; slower calls land in the last one. */
export const LATENCY_BUCKET_COUNT = 104;

/** Index of the histogram bucket that holds `ms`. */
export function latencyBucket(ms: number): number {
  if (!(ms > LATENCY_MIN_MS)) return 0;
  const i = Math.ceil(Math.log(ms / LATENCY_MIN_MS) / LOG_GROWTH);
  return i < LATENCY_BUCKET_COUNT ? i : LATENCY_BUCKET_COUNT - 1;
}

/** Representative latency of bucket `i`: the geometric middle of its bounds (within ~9%). */
export function latencyBucketValue(i: number): number {
  if (i === 0) return LATENCY_MIN_MS;
  return LATENCY_MIN_MS * LATENCY_GROWTH ** (i - 0.5);
}

/** The q-quantile (0..1) of a latency histogram in ms, or undefined when it is empty. */
export function histogramQuantile(counts: ArrayLike<number>, q: number): number | undefined {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] ?? 0;
  if (total === 0) return undefined;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= rank) return latencyBucketValue(i);
  }
  return latencyBucketValue(counts.length - 1);
}

/** Sum of the buckets of a window that are still inside it. */
export interface WindowTotals {
  ok: number;
  failed: number;
  /** Latency histogram (LATENCY_BUCKET_COUNT counts); all zero when latency is not tracked. */
  latency: Float64Array;
}

export function emptyTotals(): WindowTotals {
  return { ok: 0, failed: 0, latency: new Float64Array(LATENCY_BUCKET_COUNT) };
}

function addHistogram(into: Float64Array, from: Float64Array): void {
  for (let i = 0; i < LATENCY_BUCKET_COUNT; i++) into[i] = (into[i] ?? 0) + (from[i] ?? 0);
}

/** Adds `from` into `into` (merge by addition). */
export function addTotals(into: WindowTotals, from: WindowTotals): void {
  into.ok += from.ok;
  into.failed += from.failed;
  addHistogram(into.latency, from.latency);
}

export interface RollingWindowOptions {
  /** Length of the window in ms. */
  windowMs: number;
  /** Number of time buckets the window is cut into. */
  buckets: number;
  /** Keep a latency histogram per bucket. */
  latency: boolean;
}

/** Ok/failed counts (and optionally latency) over the last `windowMs`, in fixed buckets. */
export class RollingWindow {
  readonly bucketMs: number;
  readonly bucketCount: number;
  /** Absolute bucket number (floor(t / bucketMs)) each slot currently holds. */
  private readonly epochs: Float64Array;
  private readonly ok: Float64Array;
  private readonly failed: Float64Array;
  /** Per-slot histograms, allocated on first use of the slot. */
  private readonly latency: (Float64Array | undefined)[] | undefined;

  constructor(options: RollingWindowOptions) {
    this.bucketCount = options.buckets;
    this.bucketMs = options.windowMs / options.buckets;
    this.epochs = new Float64Array(this.bucketCount).fill(-1);
    this.ok = new Float64Array(this.bucketCount);
    this.failed = new Float64Array(this.bucketCount);
    this.latency = options.latency
      ? new Array<Float64Array | undefined>(this.bucketCount)
      : undefined;
  }

  /** Records `ok` good and `failed` bad events at time `now`, and one latency sample. */
  add(now: number, ok: number, failed: number, latencyMs?: number): void {
    const slot = this.slotFor(now);
    this.ok[slot] = (this.ok[slot] ?? 0) + ok;
    this.failed[slot] = (this.failed[slot] ?? 0) + failed;
    if (this.latency && latencyMs !== undefined) {
      const hist = (this.latency[slot] ??= new Float64Array(LATENCY_BUCKET_COUNT));
      const i = latencyBucket(latencyMs);
      hist[i] = (hist[i] ?? 0) + 1;
    }
  }

  /**
   * Adds the totals of the buckets still inside the window at `now` into `into`; with `spanMs`,
   * only those of the most recent `spanMs` (rounded up to whole buckets).
   */
  sumInto(now: number, into: WindowTotals, spanMs?: number): WindowTotals {
    const newest = Math.floor(now / this.bucketMs);
    const span =
      spanMs === undefined
        ? this.bucketCount
        : Math.min(this.bucketCount, Math.ceil(spanMs / this.bucketMs));
    const oldest = newest - span + 1;
    for (let slot = 0; slot < this.bucketCount; slot++) {
      const epoch = this.epochs[slot] ?? -1;
      if (epoch < oldest || epoch > newest) continue;
      into.ok += this.ok[slot] ?? 0;
      into.failed += this.failed[slot] ?? 0;
      const hist = this.latency?.[slot];
      if (hist) addHistogram(into.latency, hist);
    }
    return into;
  }

  /** Totals over the window at `now` (or its most recent `spanMs`). */
  totals(now: number, spanMs?: number): WindowTotals {
    return this.sumInto(now, emptyTotals(), spanMs);
  }

  /** Number of numbers this window holds: constant for a given configuration. */
  get footprint(): number {
    const histograms = this.latency?.filter(Boolean).length ?? 0;
    return this.bucketCount * 3 + histograms * LATENCY_BUCKET_COUNT;
  }

  private slotFor(now: number): number {
    const epoch = Math.floor(now / this.bucketMs);
    const slot = epoch % this.bucketCount;
    if (this.epochs[slot] !== epoch) {
      // The slot held an older bucket: reuse it.
      this.epochs[slot] = epoch;
      this.ok[slot] = 0;
      this.failed[slot] = 0;
      this.latency?.[slot]?.fill(0);
    }
    return slot;
  }
}

/** The outcome of the last `size` events (e.g. whether each of the last 100 LLM calls was empty). */
export class OutcomeRing {
  private readonly flags: Uint8Array;
  private next = 0;
  private filled = 0;
  private hits = 0;

  constructor(readonly size: number) {
    this.flags = new Uint8Array(size);
  }

  add(hit: boolean): void {
    if (this.filled === this.size) this.hits -= this.flags[this.next] ?? 0;
    else this.filled++;
    this.flags[this.next] = hit ? 1 : 0;
    if (hit) this.hits++;
    this.next = (this.next + 1) % this.size;
  }

  /** Events held (at most `size`) and how many of them were hits. */
  counts(): { total: number; hits: number } {
    return { total: this.filled, hits: this.hits };
  }
}
