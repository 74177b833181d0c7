import type { StreamFormat } from "../engine/options/stream.js";
import { createSelfHealing, type SelfHealing } from "../engine/self-healing.js";
import { isStreamRestart } from "../engine/stream-channel.js";
import type { Notifier } from "../notify/notifier.js";
import { LLM_TIMEOUT_MS, PAYMENT_TIMEOUT_MS, type Policy, type PolicyContext } from "./policy.js";
import type { Dependency } from "./scenarios.js";
import type { StreamChunk, World } from "./world.js";

/** The simulated providers' events: tokens, then a finish event; only the finish completes. */
const CHUNKS: StreamFormat<StreamChunk> = {
  read: (c) =>
    "text" in c
      ? { token: true, answer: c.text !== "" }
      : { finishReason: c.finish, outputTokens: c.tokens },
  completion: "finish",
};

/**
 * The LLM call of a streaming scenario, as a user would write it with `sh.stream`:
 * - `firstTokenMs` 10 s: a healthy first token comes in about a second here (0.8 s, 1.1 s) and
 *   in a few seconds from a hosted model under load; 10 s is far past that and short of what a
 *   person waits for an answer to start.
 * - `idleMs` 5 s: once an answer flows its events come every 125 ms here (tens of ms from a
 *   hosted model); 5 s of silence is forty gaps or more, a stall, not a pause.
 * - `afterFirstToken: "restart"`: the answer is read as it streams (a support reply shown as it
 *   comes); on a failure after the first token the reader drops what it got and the whole answer
 *   comes again from the next provider. `buffer` would hold every healthy answer back until its
 *   end to guard the few that fail; `fail` would end a cut or stalled answer in an error after
 *   part of it was read, and the task with it.
 * No `timeoutMs`: a whole-answer timeout would cut long healthy answers; the limits above and
 * the call's deadline (60 s) bound each attempt.
 */
function streamedAnswers(sh: SelfHealing, world: World): (question: string) => Promise<string> {
  const { scenario } = world;
  const llm = new Map(scenario.llm.map((d) => [d.name, d]));
  const answer = sh.stream(
    "complete",
    {
      readOnly: true,
      providers: scenario.llm.map((d) => d.name),
      format: CHUNKS,
      firstTokenMs: 10_000,
      idleMs: 5_000,
      afterFirstToken: "restart",
    },
    (question: string, ctx) => {
      const dep: Dependency | undefined = llm.get(ctx.provider ?? "") ?? scenario.llm[0];
      if (!dep) throw new Error("the scenario has no LLM provider");
      return world.stream({ dep, call: question, signal: ctx.signal });
    },
  );
  return async (question) => {
    let text = "";
    for await (const item of answer(question)) {
      // A restart marker: drop what came, the whole answer follows again from the next route.
      if (isStreamRestart(item)) text = "";
      else if ("text" in item) text += item.text;
    }
    return text;
  };
}

/**
 * The fleet's calls through selfheal with its defaults: failover between the LLM providers (a
 * streamed answer in a scenario whose answers stream), a keyed payment.
 */
// Long on purpose: selfheal configured as a user would write it, then the policy's two calls.
export function selfhealPolicy({ world, telemetry, eventLog, ruleFile }: PolicyContext): Policy {
  const { scenario, clock } = world;
  // Every escalation also fails its call, which the run pages for by the rule it applies to
  // every policy; the escalation itself is only told in the timeline.
  const pager: Notifier = {
    channel: "pager",
    send: (alert) => {
      world.note("escalation", alert.title);
      return Promise.resolve();
    },
  };
  // The status page, answered in process from the scenario (no network in a simulation).
  const page = scenario.statusPage;
  const fakeFetch = (() => {
    const t = world.elapsed();
    const degraded = page !== undefined && t >= page.fromMs && t < page.toMs;
    return Promise.resolve(Response.json({ status: { indicator: degraded ? "major" : "none" } }));
  }) as typeof fetch;

  const sh = createSelfHealing({
    agent: `sim-${scenario.name}`,
    clock,
    ...(telemetry.tracerProvider && { tracerProvider: telemetry.tracerProvider }),
    ...(telemetry.meterProvider && { meterProvider: telemetry.meterProvider }),
    logger: { warn: () => undefined },
    diagnosis: {
      ...(page && {
        statusPages: { [page.dependency]: `http://status.${page.dependency}.invalid` },
      }),
      fetch: fakeFetch,
      ...(ruleFile !== undefined && { ruleFile }),
    },
    recovery: {
      random: world.random,
      ...(eventLog !== undefined && { eventLog }),
      notifiers: [pager],
      providers: [...scenario.llm, scenario.api].map((d) => ({
        name: d.name,
        usdPerCall: d.usdPerCall,
      })),
    },
  });
  const llm = new Map(scenario.llm.map((d) => [d.name, d]));
  const [primary] = scenario.llm;
  const complete = scenario.stream
    ? streamedAnswers(sh, world)
    : sh.tool(
        "complete",
        {
          readOnly: true,
          kind: "llm",
          providers: scenario.llm.map((d) => d.name),
          timeoutMs: LLM_TIMEOUT_MS,
        },
        (question: string, ctx) => {
          const dep = llm.get(ctx.provider ?? "") ?? primary;
          if (!dep) throw new Error("the scenario has no LLM provider");
          return world.behave({ dep, call: question, signal: ctx.signal });
        },
      );
  const charge = sh.tool(
    "charge",
    {
      readOnly: false,
      providers: [scenario.api.name],
      timeoutMs: PAYMENT_TIMEOUT_MS,
      idempotencyKey: (order: string) => order,
    },
    (order: string, ctx) =>
      world.behave({ dep: scenario.api, call: order, signal: ctx.signal, key: ctx.idempotencyKey }),
  );

  let driftEvents = 0;
  let falseTrips = 0;
  const diagnoses: Record<string, number> = {};
  sh.on("diagnosis", (e) => {
    diagnoses[e.pattern] = (diagnoses[e.pattern] ?? 0) + 1;
  });
  sh.on("status-change", (e) => {
    if (e.tool === undefined) world.note("status", `agent ${e.from} -> ${e.to}`);
  });
  sh.on("circuit-change", (e) => {
    world.note("circuit", `${e.dependency} breaker ${e.state}`);
    if (e.state === "open" && !world.faultNow(e.dependency)) falseTrips++;
  });
  sh.on("diagnoser-drift", (e) => {
    if (e.tool !== undefined) return;
    driftEvents++;
    world.note(
      "drift",
      `UNKNOWN share ${(e.share * 100).toFixed(0)}% of ${e.samples} diagnoses: "${e.unknown.at(-1)?.text ?? ""}"`,
    );
  });

  return {
    complete: (question) => complete(question),
    charge: (order) => charge(order),
    figures: () => ({ falseTrips, driftEvents, diagnoses }),
    close: () => sh.close(),
  };
}
