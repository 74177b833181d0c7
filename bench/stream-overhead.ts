/**
 * What `sh.stream` costs per chunk, side by side in one process: a stream of 1,000 small chunks
 * read to its end with `for await`,
 *   bare (the async generator alone) | healed by sh.stream, no SDK | healed, recording SDK
 * (spans batched and dropped, metrics kept by a reader that never exports; no context manager).
 * The format marks every chunk a token of the answer and the last one's finish reason, with the
 * default limits (first token 20 s, idle 15 s) and mode (`fail`). The same three on a 1-chunk
 * stream give the fixed cost of a call, and the two lengths together the cost of each further
 * chunk; a plain sh.tool call is the reference for the fixed cost. Medians of rounds (harness.ts).
 * Compare ratios between versions, not absolute numbers.
 *
 * Run: npm run bench:stream-overhead [-- --rounds 7]   (writes bench/results/stream-overhead.json)
 */
import { parseArgs } from "node:util";
import { createSelfHealing, type ChunkInfo, type StreamFormat } from "../dist/index.js";
import { median, recordingSdk, report, rotatedRounds } from "./harness.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "7" } } });
const CHUNKS = 1_000;
const ROUNDS = Number(values.rounds);

interface Chunk {
  text: string;
  finish?: string;
}

/** The source: `n` small chunks, the last with a finish reason, each ready at once. */
// eslint-disable-next-line @typescript-eslint/require-await -- no wait: the iteration is measured
async function* source(n: number): AsyncGenerator<Chunk> {
  for (let i = 1; i < n; i++) yield { text: "tok" };
  yield { text: "tok", finish: "stop" };
}

const TOKEN: ChunkInfo = Object.freeze({ token: true, answer: true });
const FINISHED: ChunkInfo = Object.freeze({ token: true, answer: true, finishReason: "stop" });
const FORMAT: StreamFormat<Chunk> = {
  read: (c) => (c.finish === undefined ? TOKEN : FINISHED),
  completion: "finish",
};

/** Reads a stream to its end; the sum keeps the loop from being optimised away. */
async function drain(stream: AsyncIterable<Chunk>): Promise<number> {
  let sum = 0;
  for await (const chunk of stream) sum += chunk.text.length;
  return sum;
}

const { tracerProvider, meterProvider } = recordingSdk();

const plain = createSelfHealing({ agent: "bench" });
const recorded = createSelfHealing({ agent: "bench-sdk", tracerProvider, meterProvider });
const healed = plain.stream("chat", { readOnly: true, format: FORMAT }, (n: number) => source(n));
const healedSdk = recorded.stream("chat", { readOnly: true, format: FORMAT }, (n: number) =>
  source(n),
);
const tool = plain.tool("search", { readOnly: true }, (q: string) => Promise.resolve(q.length));

// Every case reads what it should, and the healed streams complete (not cut, not failed).
for (const n of [1, CHUNKS]) {
  const expected = 3 * n;
  for (const s of [healed(n), healedSdk(n)]) {
    const sum = await drain(s);
    const result = await s.result;
    if (sum !== expected || result.outcome !== "success" || result.chunks !== n)
      throw new Error(`a healed stream of ${n} read ${sum / 3}: ${JSON.stringify(result)}`);
  }
  if ((await drain(source(n))) !== expected) throw new Error("the bare stream misread");
}

type Cases = Record<string, () => Promise<unknown>>;
const LONG: Cases = {
  bare: () => drain(source(CHUNKS)),
  "sh.stream, no SDK": () => drain(healed(CHUNKS)),
  "sh.stream, recording SDK": () => drain(healedSdk(CHUNKS)),
};
const SHORT: Cases = {
  bare: () => drain(source(1)),
  "sh.stream, no SDK": () => drain(healed(1)),
  "sh.stream, recording SDK": () => drain(healedSdk(1)),
  "sh.tool call, no SDK (reference)": () => tool("weather in Paris"),
};

/** Every round's ns per stream (or call), by length and case: they go to the results file. */
const samplesNs: Record<string, Record<string, number[]>> = {};

/** Medians of the rounds (harness.ts's rotatedRounds), each round's kept under `label`. */
async function rotated(
  label: string,
  cases: Cases,
  batch: number,
): Promise<Record<string, number>> {
  const { ns } = await rotatedRounds(cases, { batch, rounds: ROUNDS, pauseMs: 100 });
  samplesNs[label] = ns;
  return Object.fromEntries(Object.entries(ns).map(([name, xs]) => [name, median(xs)]));
}

const long = await rotated(`${CHUNKS} chunks`, LONG, 5);
const short = await rotated("1 chunk", SHORT, 100);
await tracerProvider.shutdown();
await meterProvider.shutdown();
await plain.close();
await recorded.close();

const CASES = ["bare", "sh.stream, no SDK", "sh.stream, recording SDK"] as const;
const at = (m: Record<string, number>, k: string) => m[k] ?? NaN;
const perChunk = (k: string) => at(long, k) / CHUNKS;
/** Each chunk after the first: the two lengths' difference over the chunks between them. */
const marginal = (k: string) => (at(long, k) - at(short, k)) / (CHUNKS - 1);
const round1 = (x: number) => +x.toFixed(1);
const ratio = (a: number, b: number) => +(a / b).toFixed(2);

const rows = [
  ...CASES.map((k) => ({
    case: k,
    [`ns/stream (${CHUNKS} chunks)`]: Math.round(at(long, k)),
    "ns/chunk": round1(perChunk(k)),
    "x bare per chunk": ratio(perChunk(k), perChunk("bare")),
    "ns/stream (1 chunk)": Math.round(at(short, k)),
    "ns per further chunk": round1(marginal(k)),
    "x bare per further chunk": ratio(marginal(k), marginal("bare")),
  })),
  {
    case: "sh.tool call, no SDK (reference)",
    "ns/stream (1 chunk)": Math.round(at(short, "sh.tool call, no SDK (reference)")),
  },
];
report(
  "stream-overhead",
  rows,
  {
    [`sh.stream / bare per chunk, ${CHUNKS} chunks, no SDK`]: ratio(
      perChunk("sh.stream, no SDK"),
      perChunk("bare"),
    ),
    [`sh.stream / bare per chunk, ${CHUNKS} chunks, recording SDK`]: ratio(
      perChunk("sh.stream, recording SDK"),
      perChunk("bare"),
    ),
    "ns sh.stream adds per chunk (after the first), no SDK": round1(
      marginal("sh.stream, no SDK") - marginal("bare"),
    ),
    "ns sh.stream adds per chunk (after the first), recording SDK": round1(
      marginal("sh.stream, recording SDK") - marginal("bare"),
    ),
    "ns sh.stream adds per call (fixed: a 1-chunk stream), no SDK": Math.round(
      at(short, "sh.stream, no SDK") - at(short, "bare"),
    ),
    "ns sh.stream adds per call (fixed), recording SDK": Math.round(
      at(short, "sh.stream, recording SDK") - at(short, "bare"),
    ),
    "fixed cost added / a whole sh.tool call, no SDK": ratio(
      at(short, "sh.stream, no SDK") - at(short, "bare"),
      at(short, "sh.tool call, no SDK (reference)"),
    ),
  },
  { rounds: ROUNDS, chunks: CHUNKS, samplesNs },
);
