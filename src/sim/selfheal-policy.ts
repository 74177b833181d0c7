import { createSelfHealing } from "../engine/self-healing.js";
import type { Notifier } from "../notify/notifier.js";
import type { Policy, PolicyContext } from "./policy.js";

/** The fleet's calls through selfheal with its defaults: failover between the LLM providers, a keyed payment. */
// Long on purpose: selfheal configured as a user would write it, then the policy's two calls.
export function selfhealPolicy({ world, telemetry, eventLog }: PolicyContext): Policy {
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
  const complete = sh.tool(
    "complete",
    { readOnly: true, kind: "llm", providers: scenario.llm.map((d) => d.name), timeoutMs: 10_000 },
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
      timeoutMs: 5_000,
      idempotencyKey: (order: string) => order,
    },
    (order: string, ctx) =>
      world.behave({ dep: scenario.api, call: order, signal: ctx.signal, key: ctx.idempotencyKey }),
  );

  let driftEvents = 0;
  let falseTrips = 0;
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
    figures: () => ({ falseTrips, driftEvents }),
    close: () => sh.close(),
  };
}
