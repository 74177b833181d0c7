/**
 * Durations as the event log's rollup lines carry them: sparse log-scale buckets, written as
 * `{ "<index>": count }`. Bucket i > 0 holds (2^((i-1)/8), 2^(i/8)] ms, about 9 % wide, so a
 * quantile read back is within 4.5 % of the true value; bucket 0 holds every duration up to 1 ms
 * (too short to matter to a threshold). An hour is bucket 175: a line stays small.
 */
export const BUCKETS_PER_DOUBLING = 8;
/** Highest index a reader accepts (2^50 ms is past any duration a clock reports). */
export const MAX_BUCKET = 50 * BUCKETS_PER_DOUBLING;

/** The bucket of a duration in ms. */
export function bucketOf(ms: number): number {
  if (!(ms > 1)) return 0;
  return Math.min(MAX_BUCKET, Math.ceil(Math.log2(ms) * BUCKETS_PER_DOUBLING));
}

/** The point a bucket stands for: its geometric middle (0 ms for bucket 0). */
export function bucketPoint(i: number): number {
  return i <= 0 ? 0 : 2 ** ((i - 0.5) / BUCKETS_PER_DOUBLING);
}

/** Counts per bucket: filled by a writer, encoded on a line; added up and read by the report. */
export class Buckets {
  private readonly counts = new Map<number, number>();
  total = 0;

  add(ms: number, n = 1): void {
    this.addBucket(bucketOf(ms), n);
  }

  addBucket(i: number, n: number): void {
    this.counts.set(i, (this.counts.get(i) ?? 0) + n);
    this.total += n;
  }

  /** Adds an encoded line's buckets (already validated: see `bucketsProblem`). */
  addEncoded(encoded: Readonly<Record<string, number>>): void {
    for (const [key, n] of Object.entries(encoded)) this.addBucket(Number(key), n);
  }

  /** The nearest-rank q-quantile (0 < q <= 1) as its bucket's point, or null when empty. */
  quantile(q: number): number | null {
    if (this.total === 0) return null;
    const rank = Math.min(this.total, Math.max(1, Math.ceil(q * this.total)));
    let seen = 0;
    for (const i of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(i) ?? 0;
      if (seen >= rank) return bucketPoint(i);
    }
    return null;
  }

  /** How many durations exceed `ms` (by bucket: those in buckets wholly above it). */
  above(ms: number): number {
    const limit = bucketOf(ms);
    let n = 0;
    for (const [i, k] of this.counts) if (i > limit) n += k;
    return n;
  }

  /** The encoding written on a line: `{ "<index>": count }`, lowest index first. */
  toJSON(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const i of [...this.counts.keys()].sort((a, b) => a - b))
      out[String(i)] = this.counts.get(i) ?? 0;
    return out;
  }
}

/** Why `value` is not an encoded set of buckets, or undefined when it is one. */
export function bucketsProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not an object";
  for (const [key, n] of Object.entries(value as Record<string, unknown>)) {
    const i = Number(key);
    if (!/^\d{1,3}$/.test(key) || i > MAX_BUCKET) return `bucket ${JSON.stringify(key)} is not one`;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1)
      return `bucket ${key} has no count`;
  }
  return undefined;
}
