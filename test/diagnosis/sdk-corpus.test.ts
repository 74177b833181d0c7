/**
 * Real client errors, diagnosed and recovered: the official OpenAI, Anthropic and Google GenAI
 * SDKs (openai 7 and 6, @google/genai 3 and 2, @anthropic-ai/sdk), fetch + HttpResponseError
 * and axios against a local server that answers as each provider documents, and against
 * connection faults (see sdk-corpus.ts). SDK retries are off.
 *
 * Each case checks, on the client's own error object:
 * - `sh.diagnose(error)`: pattern, rule, evidence tier, the wait it carries;
 * - through a wrapped tool (default plans, sleeps skipped by SkipClock): retryable patterns are
 *   sent again and honour the server's wait, non-retryable ones are sent once; the caller gets
 *   the client's own error object, or, where the plan ends in an escalation, a
 *   HumanEscalationRequiredError whose `cause` is that same object.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  type DiagnosisEvent,
  type RecoveryEvent,
} from "../../src/index.js";
import { NON_RETRYABLE_PATTERNS } from "../../src/telemetry/conventions.js";
import {
  callerOf,
  clientVersion,
  CLIENTS,
  CORPUS,
  dnsFailsFast,
  SkipClock,
  startCorpusServer,
  type Client,
  type CorpusServer,
} from "./sdk-corpus.js";

let server: CorpusServer;
let dnsFast = false;
const tally = new Map<Client, { cases: number; passed: number; skipped: number }>(
  CLIENTS.map((c) => [c, { cases: 0, passed: 0, skipped: 0 }]),
);

beforeAll(async () => {
  [server, dnsFast] = await Promise.all([startCorpusServer(), dnsFailsFast()]);
});
afterAll(async () => {
  await server.close();
  const rows = CLIENTS.map((client) => ({
    client,
    version: clientVersion(client),
    ...tally.get(client),
  }));
  console.log("SDK corpus, per client:");
  console.table(rows);
});

describe("real SDK errors: diagnosis, retries and the error the caller gets", () => {
  for (const c of CORPUS)
    it(c.id, async (ctx) => {
      const counts = tally.get(c.client) ?? { cases: 0, passed: 0, skipped: 0 };
      counts.cases++;
      if (c.fault === "dns" && !dnsFast) {
        counts.skipped++;
        ctx.skip(); // this machine cannot fail a lookup quickly
      }
      const clock = new SkipClock();
      const sh = createSelfHealing({ agent: "corpus", clock, logger: { warn: () => undefined } });
      const diagnoses: DiagnosisEvent[] = [];
      const recoveries: RecoveryEvent[] = [];
      sh.on("diagnosis", (d) => diagnoses.push(d));
      sh.on("recovery", (r) => recoveries.push(r));
      const send = callerOf(c, server);
      const thrown: unknown[] = [];
      const complete = sh.tool("complete", { readOnly: true }, async (_: undefined, call) => {
        try {
          return await send(call.signal);
        } catch (e) {
          thrown.push(e);
          throw e;
        }
      });
      const hitsBefore = server.hits(c.id);
      const caught = await complete(undefined).then(
        () => expect.unreachable(`${c.id}: the call succeeded`),
        (e: unknown) => e,
      );

      // The diagnosis of the client's own error.
      const first = thrown[0];
      const d = await sh.diagnose(first, { tool: "complete" });
      expect({
        pattern: d.pattern,
        rule: d.rule,
        evidence: d.evidence,
        retryAfterMs: d.retryAfterMs,
      }).toEqual({ retryAfterMs: undefined, ...c.expect });
      const retryable = !NON_RETRYABLE_PATTERNS.includes(c.expect.pattern);
      expect(d.retryable).toBe(retryable);
      expect(diagnoses[0]).toMatchObject({ pattern: c.expect.pattern, rule: c.expect.rule });

      // Retried when retrying can help, once only when it cannot; every attempt reached the server.
      if (retryable) expect(thrown.length).toBeGreaterThan(1);
      else expect(thrown.length).toBe(1);
      if (c.fault !== "refused" && c.fault !== "dns")
        expect(server.hits(c.id) - hitsBefore).toBe(thrown.length);
      if (c.expect.retryAfterMs !== undefined)
        expect(clock.waits[0]).toBeGreaterThanOrEqual(c.expect.retryAfterMs);
      expect(recoveries).toHaveLength(1);

      // The caller gets the client's own error object (the last attempt's), unchanged.
      const delivered = isHumanEscalationRequiredError(caught) ? caught.cause : caught;
      expect(delivered).toBe(thrown.at(-1));
      expect(thrown.every((e) => e !== undefined && e !== null)).toBe(true);
      await sh.close();
      counts.passed++;
    });
});
