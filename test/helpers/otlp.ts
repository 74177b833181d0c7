/**
 * An OTLP/HTTP receiver on 127.0.0.1 (a real node:http server, as a Collector would be) and
 * decoders for what it receives, OTLP JSON and protobuf, into one flat shape for assertions.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:net";
import { startServer } from "./http-server.js";
import { afterAll, beforeAll, expect } from "vitest";

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  kind: number;
  /** Start time, ns since the epoch. */
  start: bigint;
  attributes: Record<string, unknown>;
  statusCode: number;
  events: string[];
  resource: Record<string, unknown>;
}

export interface ReceivedMetric {
  name: string;
  resource: Record<string, unknown>;
  /** Data points: attributes and value (a sum or gauge value, a histogram's count). */
  points: { attributes: Record<string, unknown>; value: number }[];
  /** 1 delta, 2 cumulative (sums and histograms). */
  temporality: number | undefined;
}

/** A receiver that answers 200 to every export and keeps the requests. */
export async function startReceiver(
  respond: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void = (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  },
) {
  const received: Received[] = [];
  const server = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      received.push({ path: req.url ?? "", headers: req.headers, body });
      respond(req, res, body);
    });
  });
  return {
    url: server.url,
    port: server.port,
    close: server.close,
    /** Requests that reached the handler (answered or not). */
    get hits() {
      return server.hits;
    },
    received,
    spans: () => received.filter((r) => r.path === "/v1/traces").flatMap(decodeSpans),
    metrics: () => received.filter((r) => r.path === "/v1/metrics").flatMap(decodeMetrics),
  };
}

/** A port nothing listens on right now (a collector that is down). */
export async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => {
        resolve(port);
      });
    });
  });
}

/** A receiver that accepts connections and reads requests but never answers (a hung collector). */
export async function startHangingReceiver() {
  return startReceiver(() => undefined);
}

// --- JSON ------------------------------------------------------------------------------------

interface JsonKeyValue {
  key: string;
  value: Record<string, unknown>;
}
const jsonValue = (v: Record<string, unknown>): unknown => {
  if ("stringValue" in v) return v.stringValue;
  if ("boolValue" in v) return v.boolValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return Number(v.doubleValue);
  if ("arrayValue" in v)
    return ((v.arrayValue as { values?: Record<string, unknown>[] }).values ?? []).map(jsonValue);
  return undefined;
};
const jsonAttributes = (kvs: JsonKeyValue[] | undefined) =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, jsonValue(kv.value)]));

interface JsonSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  startTimeUnixNano: string | number;
  attributes?: JsonKeyValue[];
  status?: { code?: number };
  events?: { name: string }[];
}

function decodeJsonSpans(body: string): ReceivedSpan[] {
  const request = JSON.parse(body) as {
    resourceSpans: {
      resource?: { attributes?: JsonKeyValue[] };
      scopeSpans: { spans: JsonSpan[] }[];
    }[];
  };
  return request.resourceSpans.flatMap((rs) => {
    const resource = jsonAttributes(rs.resource?.attributes);
    return rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s) => ({
        name: s.name,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? "",
        kind: s.kind,
        start: BigInt(s.startTimeUnixNano),
        attributes: jsonAttributes(s.attributes),
        statusCode: s.status?.code ?? 0,
        events: (s.events ?? []).map((e) => e.name),
        resource,
      })),
    );
  });
}

interface JsonPoint {
  attributes?: JsonKeyValue[];
  asDouble?: number;
  asInt?: number | string;
  count?: number | string;
}
interface JsonMetric {
  name: string;
  sum?: { dataPoints: JsonPoint[]; aggregationTemporality?: number };
  gauge?: { dataPoints: JsonPoint[] };
  histogram?: { dataPoints: JsonPoint[]; aggregationTemporality?: number };
}

function decodeJsonMetrics(body: string): ReceivedMetric[] {
  const request = JSON.parse(body) as {
    resourceMetrics: {
      resource?: { attributes?: JsonKeyValue[] };
      scopeMetrics: { metrics: JsonMetric[] }[];
    }[];
  };
  return request.resourceMetrics.flatMap((rm) => {
    const resource = jsonAttributes(rm.resource?.attributes);
    return rm.scopeMetrics.flatMap((sm) =>
      sm.metrics.map((m) => {
        const data = m.sum ?? m.gauge ?? m.histogram;
        return {
          name: m.name,
          resource,
          temporality: (m.sum ?? m.histogram)?.aggregationTemporality,
          points: (data?.dataPoints ?? []).map((p) => ({
            attributes: jsonAttributes(p.attributes),
            value: Number(p.count ?? p.asDouble ?? p.asInt ?? NaN),
          })),
        };
      }),
    );
  });
}

// --- protobuf (just the fields the tests read) -----------------------------------------------

type Field = { no: number; wire: number; int: bigint; bytes: Buffer };

/** The fields of one protobuf message, in order (wire types 0, 1, 2, 5). */
function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = () => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[i++];
      if (byte === undefined) throw new Error("truncated varint");
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    const empty = Buffer.alloc(0);
    if (wire === 0) out.push({ no, wire, int: varint(), bytes: empty });
    else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, wire, int: 0n, bytes: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      out.push({ no, wire, int: 0n, bytes: buf.subarray(i, i + len) });
      i += len;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}
const all = (fs: Field[], no: number) => fs.filter((f) => f.no === no);
const one = (fs: Field[], no: number) => fs.find((f) => f.no === no);
const str = (f: Field | undefined) => f?.bytes.toString("utf8") ?? "";
const hex = (f: Field | undefined) => f?.bytes.toString("hex") ?? "";

function anyValue(buf: Buffer): unknown {
  const [f] = fields(buf);
  if (!f) return undefined;
  switch (f.no) {
    case 1:
      return str(f);
    case 2:
      return f.int !== 0n;
    case 3:
      return Number(BigInt.asIntN(64, f.int));
    case 4:
      return f.bytes.readDoubleLE(0);
    default:
      return undefined;
  }
}
const pbAttributes = (kvs: Field[]) =>
  Object.fromEntries(
    kvs.map((kv) => {
      const fs = fields(kv.bytes);
      const value = one(fs, 2);
      return [str(one(fs, 1)), value ? anyValue(value.bytes) : undefined];
    }),
  );

function decodeProtobufSpans(body: Buffer): ReceivedSpan[] {
  return all(fields(body), 1).flatMap((rs) => {
    const rsf = fields(rs.bytes);
    const res = one(rsf, 1);
    const resource = res ? pbAttributes(all(fields(res.bytes), 1)) : {};
    return all(rsf, 2).flatMap((ss) =>
      all(fields(ss.bytes), 2).map((span) => {
        const s = fields(span.bytes);
        const status = one(s, 15);
        return {
          traceId: hex(one(s, 1)),
          spanId: hex(one(s, 2)),
          parentSpanId: hex(one(s, 4)),
          name: str(one(s, 5)),
          kind: Number(one(s, 6)?.int ?? 0n),
          start: one(s, 7)?.bytes.readBigUInt64LE(0) ?? 0n,
          attributes: pbAttributes(all(s, 9)),
          statusCode: status ? Number(one(fields(status.bytes), 3)?.int ?? 0n) : 0,
          events: all(s, 11).map((e) => str(one(fields(e.bytes), 2))),
          resource,
        };
      }),
    );
  });
}

/** Metric names and resources only (the JSON tests read values). */
function decodeProtobufMetrics(body: Buffer): ReceivedMetric[] {
  return all(fields(body), 1).flatMap((rm) => {
    const rmf = fields(rm.bytes);
    const res = one(rmf, 1);
    const resource = res ? pbAttributes(all(fields(res.bytes), 1)) : {};
    return all(rmf, 2).flatMap((sm) =>
      all(fields(sm.bytes), 2).map((metric) => ({
        name: str(one(fields(metric.bytes), 1)),
        resource,
        points: [],
        temporality: undefined,
      })),
    );
  });
}

const isJson = (r: Received) => String(r.headers["content-type"]).includes("json");

export function decodeSpans(r: Received): ReceivedSpan[] {
  return isJson(r) ? decodeJsonSpans(r.body.toString("utf8")) : decodeProtobufSpans(r.body);
}

export function decodeMetrics(r: Received): ReceivedMetric[] {
  return isJson(r) ? decodeJsonMetrics(r.body.toString("utf8")) : decodeProtobufMetrics(r.body);
}

/** The span tree as nested names, children in start order (parents found by id). */
export function spanTree(spans: readonly ReceivedSpan[]): unknown[] {
  const ids = new Set(spans.map((s) => s.spanId));
  const build = (parent: string): unknown[] =>
    [...spans]
      .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0))
      .filter((s) => (ids.has(s.parentSpanId) ? s.parentSpanId : "") === parent)
      .map((s) => {
        const children = build(s.spanId);
        return children.length ? { [s.name]: children } : s.name;
      });
  return build("");
}

/**
 * Waits until `check` holds (polling), or fails with `what`. The limit only ends a wait that
 * would never end: a busy machine may take seconds for what takes milliseconds (issue 27).
 */
export async function eventually(check: () => boolean, what: string, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A receiver for the whole suite (started before its tests, closed after): call it for it. */
export function suiteReceiver(): () => Awaited<ReturnType<typeof startReceiver>> {
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });
  return () => receiver ?? expect.unreachable("the suite's receiver has not started");
}
