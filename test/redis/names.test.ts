import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { readFleet, redisStore } from "../../src/redis/index.js";
import { SelfHealConfigError } from "../../src/errors.js";
import { AgentKeys, checkPrefix, decodeName, encodeName } from "../../src/redis/keys.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("Redis key names");

/** What an encoded name may hold: nothing that shapes a key, a field, a hash tag or a glob. */
const SAFE = /^[A-Za-z0-9\-_.!~'()%]*$/;

const TEN_KB = `${"é".repeat(4_000)}\uD800${":{}*\n".repeat(400)}`;

/** Names that have broken key schemes: unpaired surrogates, key syntax, globs, newlines, size. */
const HOSTILE = [
  "\uD800",
  "a\uDC00b",
  "\uDFFF\uD800", // a low then a high surrogate: two lone ones, not a pair
  "\uD83D\uDE00 \uD83D", // a pair, then half of one
  "x:y",
  "{tag}",
  "}{",
  "*",
  "a*b",
  "line\nbreak\r\n",
  "nul\u0000esc\u001b[31mdel\u007f",
  "sp ace|bar",
  "%",
  "%2A", // the encoding of "*": must stay apart from "*"
  "%ED%A0%80", // the encoding of "\uD800": must stay apart from it
  TEN_KB,
];

/** A deterministic generator of strings heavy in surrogates, escapes and key syntax. */
function* randomStrings(count: number, seed = 7): Generator<string> {
  let state = seed;
  const next = () => (state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const pool = ["%", "*", ":", "{", "}", "|", " ", "\n", "%E", "%ED%A0", "%2A", "A", "é", "\u0000"];
  for (let n = 0; n < count; n++) {
    let s = "";
    const length = Math.floor(next() * 12);
    for (let i = 0; i < length; i++) {
      const r = next();
      if (r < 0.3) s += String.fromCharCode(0xd800 + Math.floor(next() * 0x800));
      else if (r < 0.6) s += pool[Math.floor(next() * pool.length)] ?? "";
      else s += String.fromCharCode(Math.floor(next() * 0x10000));
    }
    yield s;
  }
}

const wellFormed = (s: string) => {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
};

describe("key names: encodeName and decodeName", () => {
  it("are total and reversible for every string, lone surrogates included", () => {
    for (const name of [...HOSTILE, ...randomStrings(10_000)]) {
      const encoded = encodeName(name);
      expect(encoded).toMatch(SAFE);
      expect(decodeName(encoded)).toBe(name);
    }
  });

  it("keep the encoding of running fleets: encodeURIComponent's, but for '*'", () => {
    const ordinary = ["search", "pay:card", "ask {llm}", "billing/charge", "日本語", "😀", "a b"];
    for (const name of [...ordinary, ...randomStrings(5_000)].filter(wellFormed)) {
      if (name.includes("*")) continue;
      expect(encodeName(name)).toBe(encodeURIComponent(name));
    }
    expect(encodeName("a*b")).toBe("a%2Ab");
    expect(decodeName("a*b")).toBe("a*b"); // a key written before `*` was escaped
    expect(encodeName("\uD800")).toBe("%ED%A0%80");
    expect(encodeName("\uDFFF")).toBe("%ED%BF%BF");
  });

  it("never throws decoding what no encoder wrote; text that is no escape stays as it is", () => {
    for (const text of [
      "%",
      "%zz",
      "%C0%80",
      "%ED%A0",
      "%F4%90%80%80",
      "a%",
      ...randomStrings(5_000, 11),
    ])
      expect(() => decodeName(text)).not.toThrow();
    expect(decodeName("%zz%4")).toBe("%zz%4");
    expect(decodeName("%C0%80x")).toBe("%C0%80x"); // an overlong NUL is no character
    expect(decodeName("%ED%A0%80%41")).toBe("\uD800A");
  });

  it("decode each UTF-8 sequence beside a lone surrogate by its own rules (shortest form, up to U+10FFFF)", () => {
    // The lone surrogate makes decodeURIComponent throw: the rest is decoded byte by byte.
    const lone = "%ED%A0%80";
    const cases: [string, string][] = [
      ["%C3%A9", "\u00E9"], // 2 bytes
      ["%C1%81", "%C1%81"], // overlong 2 bytes
      ["%E2%82%AC", "\u20AC"], // 3 bytes
      ["%E0%A0%80", "\u0800"], // the first 3-byte code point
      ["%E0%80%80", "%E0%80%80"], // overlong 3 bytes (E0 needs A0 or more next)
      ["%E2%82%41", "%E2%82A"], // a third byte that is no continuation
      ["%E2%C3%A9", "%E2\u00E9"], // cut short by the next character
      ["%F0%9F%98%80", "\u{1F600}"], // 4 bytes
      ["%F0%90%80%80", "\u{10000}"], // the first 4-byte code point
      ["%F0%80%80%80", "%F0%80%80%80"], // overlong 4 bytes (F0 needs 90 or more next)
      ["%F4%8F%BF%BF", "\u{10FFFF}"], // the last code point
      ["%F4%90%80%80", "%F4%90%80%80"], // past U+10FFFF
      ["%F5%80%80%80", "%F5%80%80%80"], // no UTF-8 starts with F5
    ];
    for (const [bytes, text] of cases)
      expect(decodeName(lone + bytes), bytes).toBe("\uD800" + text);
  });

  it("take a prefix of 1-64 plain characters, and name any other in the error, cut", () => {
    for (const prefix of ["a", "selfheal", "prod.eu-1_b", "x".repeat(64)])
      expect(checkPrefix(prefix)).toBe(prefix);
    const refusal = (prefix: unknown) => {
      try {
        checkPrefix(prefix);
      } catch (error) {
        expect(error).toBeInstanceOf(SelfHealConfigError);
        return (error as Error).message;
      }
      throw new Error(`expected ${String(prefix)} to be refused`);
    };
    for (const prefix of ["", "x".repeat(65), "a:b", "a{b}", "a b", "a*", 7, undefined])
      expect(refusal(prefix)).toContain(
        `expected 1-64 letters, digits, "_", "." or "-", got ${JSON.stringify(String(prefix)).slice(0, 80)}`,
      );
    expect(refusal("y".repeat(200))).toContain(`got "${"y".repeat(79)}`);
    expect(refusal("y".repeat(200))).not.toContain("y".repeat(80));
  });

  it("give each agent a non-empty hash tag holding its encoded name", () => {
    for (const agent of ["", ...HOSTILE]) {
      const { tag } = new AgentKeys("p", agent);
      expect(hashTag(`${tag}:c:1`)).toBe(encodeName(agent) || "%");
    }
  });
});

/** The hash tag Redis Cluster hashes a key by: between the first `{` and the next `}`. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf("{");
  const close = key.indexOf("}", open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** Every key on the server (SCAN, the whole keyspace). */
async function allKeys(client: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await client.scan(cursor, "COUNT", 1_000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== "0");
  return keys;
}

describe.skipIf(!available)("hostile names on a real redis-server", () => {
  const suite = redisForSuite();

  it("stay inside their keys: only keys under the prefix, each agent's with its own tag; read back by name", async () => {
    // It reads the whole keyspace: start from an empty one, whichever case of the file ran first.
    await suite.admin.flushall();
    const agents = ["", "plain", ...HOSTILE];
    const tools = ["search", ...HOSTILE];
    const store = redisStore({ url: suite.redis.url, prefix: "names" });
    const now = Date.now();
    for (const [a, agent] of agents.entries()) {
      for (const [t, tool] of tools.entries()) {
        const outcome = (a + t) % 3 === 0 ? "error" : "success";
        store.recordCall({ agent, tool, outcome, durationMs: 10 + t, empty: t % 2 === 0 }, now);
        store.recordCall({ agent, tool, outcome: "success", durationMs: 5 }, now);
      }
      store.recordTask({ agent, outcome: "completed" }, now);
    }
    await store.flush();
    expect(store.isDegraded).toBe(false);
    await store.close();

    const keys = await allKeys(suite.admin);
    const tags = new Set(agents.map((a) => encodeName(a) || "%"));
    const seen = new Set<string>();
    for (const key of keys) {
      if (key === "names:agents") continue;
      // The tag, then a kind and plain parts (bucket, batch id): no name outside the tag.
      const shape = /^names:\{([A-Za-z0-9\-_.!~'()%]+)\}:([a-z]+(?::[A-Za-z0-9._-]+)*)$/.exec(key);
      expect(shape, key.slice(0, 120)).not.toBeNull();
      const tag = hashTag(key) ?? "";
      expect(tag).toBe(shape?.[1]);
      if (tag === "fleet") continue; // the fleet's own state (no agent here is named "fleet")
      expect(tags.has(tag), tag.slice(0, 120)).toBe(true);
      seen.add(tag);
      if (shape?.[2]?.startsWith("c:")) {
        for (const field of await suite.admin.hkeys(key))
          expect(field).toMatch(/^[A-Za-z0-9\-_.!~'()%]+\|(ok|f|h\d+)$/);
      }
    }
    expect([...seen].sort()).toEqual([...tags].sort());
    const listed = (await suite.admin.smembers("names:agents")).map(decodeName);
    expect(listed.sort()).toEqual([...agents].sort());

    // Another worker reads each agent back under the same names, its counts whole.
    const reader = redisStore({ url: suite.redis.url, prefix: "names" });
    for (const [a, agent] of agents.entries()) {
      const signals = await reader.read(agent, now);
      expect([...signals.tools.keys()].sort()).toEqual([...tools].sort());
      for (const [t, tool] of tools.entries()) {
        const scope = signals.tools.get(tool);
        const failed = (a + t) % 3 === 0 ? 1 : 0;
        expect(scope?.calls.ok).toBe(2 - failed);
        expect(scope?.calls.failed).toBe(failed);
        expect(scope?.llm).toEqual({ total: 1, empty: t % 2 === 0 ? 1 : 0 });
      }
      expect(signals.agent.tasks.completed).toBe(1);
    }
    await reader.close();
  });

  it("an instance named with them is made, calls without a warning, and the fleet sees its tools", async () => {
    const agent = "agent\uD800:{x}*";
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m) };
    const store = redisStore({ url: suite.redis.url, prefix: "names2", logger });
    const sh = createSelfHealing({ agent, store, logger });
    const tools = HOSTILE.map((name) => sh.tool(name, { readOnly: true }, () => "ok"));
    for (const tool of tools) await expect(tool(undefined)).resolves.toBe("ok");
    await expect(sh.status()).resolves.toMatchObject({ status: "healthy" });
    await sh.close();
    expect(warnings).toEqual([]);
    const fleet = await readFleet({ url: suite.redis.url, prefix: "names2" });
    expect(fleet.agents.map((a) => a.agent)).toEqual([agent]);
    expect(Object.keys(fleet.agents[0]?.tools ?? {}).sort()).toEqual([...HOSTILE].sort());
  });

  it("breaker dependencies and alert kinds keep their names in the fleet's keys", async () => {
    const store = redisStore({ url: suite.redis.url, prefix: "names3" });
    const now = Date.now();
    store.recordCall({ agent: "a", tool: "t", outcome: "success", durationMs: 1 }, now);
    await store.flush(); // connected
    for (const name of HOSTILE) {
      store.fleet.publish(name, { open: true, until: now + 60_000, opens: 1, at: now });
      await store.fleet.admit(name, now, 60_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 200)); // publish does not wait
    await store.close();
    const fleetKeys = (await allKeys(suite.admin)).filter((k) => k.startsWith("names3:{fleet}"));
    expect(fleetKeys.length).toBeGreaterThanOrEqual(2 * HOSTILE.length);
    for (const key of fleetKeys) {
      expect(key, key.slice(0, 120)).toMatch(/^names3:\{fleet\}:[a-z]+(:[A-Za-z0-9\-_.!~'()%]+)*$/);
    }
    const fleet = await readFleet({ url: suite.redis.url, prefix: "names3" });
    expect(fleet.openBreakers.map((b) => b.dependency).sort()).toEqual([...HOSTILE].sort());
    expect(fleet.throttledAlerts.map((t) => t.kind).sort()).toEqual([...HOSTILE].sort());
  });
});
