/** A log's UNKNOWN texts: ordinary errors, and hostile ones (punctuation runs, long words). */
export function hostileLog(n: number): { error: string; tool: string; at: number }[] {
  const out: { error: string; tool: string; at: number }[] = [];
  const shapes = [
    (i: number) => `Upstream shard ${i} refused the write`,
    (i: number) => `Upstream shard ${"!".repeat(i % 300)} refused... the write (${i})`,
    (i: number) => `quota: ${"(".repeat(i % 50)} budget ${i} spent !!! ${")".repeat(i % 40)}`,
    (i: number) => `worker-${i % 7} said: ${":".repeat(1 + (i % 5))} try again later`,
    (i: number) => `x${"y".repeat(200 + (i % 90))} invalid token at ${i}`,
    (i: number) => `${"\\".repeat(i % 9)}[*] {${i}} $^ .+? | timeout`,
    (i: number) => `a\u00a0b ${i} \u202e reset by peer --- ${"-".repeat(i % 70)}`,
  ];
  for (let i = 0; i < n; i++)
    for (const [k, shape] of shapes.entries())
      if (i % shapes.length === k) out.push({ error: shape(i), tool: `t${i % 3}`, at: 1_000 + i });
  return out;
}
