/**
 * Durations for percentiles in bounded memory. The first EXACT_LIMIT values are kept as they
 * are (nearest-rank percentiles, exact); past that they are folded into a log-bucket histogram
 * (DDSketch-like: bucket i holds (γ^(i-1), γ^i] with γ = 1.01, so a percentile is within 0.5 %
 * of the true value), whose size depends on the spread of the values, never on their number
 * (about 2,800 buckets from 1 µs to 11 days).
 */
/** The array's first bucket (γ^-1400: about 0.9 µs) and its length (to γ^1400: 11 days). */
const DENSE_FROM = -1400;
const DENSE_SIZE = 2800;

export class DurationSketch {
  static readonly EXACT_LIMIT = 10_000;
  private static readonly GAMMA = 1.01;
  private static readonly LOG_GAMMA = Math.log(DurationSketch.GAMMA);
  private exact: number[] | undefined = [];
  /**
   * Buckets DENSE_FROM to DENSE_FROM + DENSE_SIZE - 1 (about 1 µs to 11 days), by index: 11 KB,
   * made at the first fold (a count past 2^32 in one bucket would take terabytes of log).
   */
  private dense: Uint32Array | undefined;
  /** Buckets outside that range, rare. */
  private readonly sparse = new Map<number, number>();
  private zeros = 0;
  count = 0;

  /** `exactLimit`: values kept exactly before folding (fewer for the many per-name sketches). */
  constructor(private readonly exactLimit = DurationSketch.EXACT_LIMIT) {}

  add(value: number): void {
    this.count++;
    if (this.exact) {
      this.exact.push(value);
      if (this.exact.length <= this.exactLimit) return;
      const all = this.exact;
      this.exact = undefined;
      for (const v of all) this.fold(v);
      return;
    }
    this.fold(value);
  }

  private fold(value: number): void {
    if (value <= 0) {
      this.zeros++;
      return;
    }
    const i = Math.ceil(Math.log(value) / DurationSketch.LOG_GAMMA);
    const slot = i - DENSE_FROM;
    // An array slot, not a Map entry: millions of durations fold through here.
    if (slot >= 0 && slot < DENSE_SIZE) {
      this.dense ??= new Uint32Array(DENSE_SIZE);
      this.dense[slot] = (this.dense[slot] ?? 0) + 1;
    } else this.sparse.set(i, (this.sparse.get(i) ?? 0) + 1);
  }

  /** The folded buckets with a count, in order: [index, count]. */
  private *buckets(): Generator<[number, number]> {
    const sparse = [...this.sparse].sort((a, b) => a[0] - b[0]);
    // The sparse buckets below the array, the array's, then the sparse ones above it.
    const above = sparse.findIndex(([i]) => i >= DENSE_FROM);
    const split = above === -1 ? sparse.length : above;
    yield* sparse.slice(0, split);
    if (this.dense)
      for (let slot = 0; slot < DENSE_SIZE; slot++) {
        const n = this.dense[slot] ?? 0;
        if (n > 0) yield [slot + DENSE_FROM, n];
      }
    yield* sparse.slice(split);
  }

  /** The nearest-rank q-quantile (0 < q <= 1): the value of rank ⌈q·n⌉, or null when empty. */
  quantile(q: number): number | null {
    if (this.count === 0) return null;
    const rank = Math.min(this.count, Math.max(1, Math.ceil(q * this.count)));
    if (this.exact) return [...this.exact].sort((a, b) => a - b)[rank - 1] ?? null;
    if (rank <= this.zeros) return 0;
    let seen = this.zeros;
    for (const [i, n] of this.buckets()) {
      seen += n;
      if (seen >= rank) return DurationSketch.point(i);
    }
    return null;
  }

  /**
   * How many values fall in each bin [edges[i], edges[i+1]) (the last bin open-ended): the
   * distribution the page draws. Folded values count at their bucket's point.
   */
  histogram(edges: readonly number[]): number[] {
    const counts: number[] = edges.map(() => 0);
    const put = (value: number, n: number) => {
      let i = edges.length - 1;
      while (i > 0 && value < (edges[i] ?? 0)) i--;
      counts[i] = (counts[i] ?? 0) + n;
    };
    if (this.exact) for (const v of this.exact) put(v, 1);
    else {
      put(0, this.zeros);
      for (const [i, n] of this.buckets()) put(DurationSketch.point(i), n);
    }
    return counts;
  }

  /** The point of the bucket (γ^(i-1), γ^i] whose relative error is smallest. */
  private static point(i: number): number {
    return (2 * DurationSketch.GAMMA ** i) / (DurationSketch.GAMMA + 1);
  }
}
