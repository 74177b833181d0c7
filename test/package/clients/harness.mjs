/**
 * Runs every scenario of SCENARIOS through one provider SDK healed in one line, as a user of the
 * installed package would: the client scripts beside this file (openai-chat.mjs, ...) say how to
 * make, heal and call their SDK; each scenario gets its own selfheal instance and two fake
 * providers of selfheal/testing on 127.0.0.1 (the primary, faults injected, and a fallback route's
 * base URL), and what happened is printed as one JSON line for test/package/install.test.ts to
 * judge. The SDK clients keep their own defaults (retries on): the healed client must turn them off.
 */
import process from "node:process";
import { createSelfHealing } from "selfheal";
import { startFakeProvider } from "selfheal/testing";

/** The first-token and idle limits of the stall scenarios (ms): generous, a busy machine is slow. */
const STALL_LIMIT_MS = 5_000;

/** Each scenario: a fault on the primary's first request(s), a fallback route or not, options. */
export const SCENARIOS = [
  {
    name: "rate_limit",
    modes: ["plain", "stream"],
    fault: ["rate_limit", { first: 1 }, { retryAfterSeconds: 1 }],
  },
  {
    name: "http_503",
    modes: ["plain", "stream"],
    fault: ["http_503", { first: 2 }],
    fallback: true,
  },
  { name: "auth", modes: ["plain", "stream"], fault: ["auth", { first: 1 }] },
  {
    name: "connection_reset",
    modes: ["plain", "stream"],
    fault: ["connection_reset", { first: 1 }],
    fallback: true,
  },
  { name: "cut_body", modes: ["plain"], fault: ["malformed_json", { first: 1 }], fallback: true },
  {
    name: "hang",
    modes: ["plain"],
    fault: ["hang", { first: 1 }],
    fallback: true,
    options: { timeoutMs: STALL_LIMIT_MS },
  },
  {
    name: "cut_before_first_token",
    modes: ["stream"],
    fault: ["stream_cut", { first: 1 }, { afterTokens: 0 }],
    fallback: true,
  },
  {
    name: "cut_after_first_token",
    modes: ["stream"],
    fault: ["stream_cut", { first: 1 }, { afterTokens: 2 }],
    fallback: true,
  },
  {
    name: "cut_after_first_token_restart",
    modes: ["stream"],
    fault: ["stream_cut", { first: 1 }, { afterTokens: 2 }],
    fallback: true,
    options: { afterFirstToken: "restart" },
  },
  {
    name: "error_event_before_first_token",
    modes: ["stream"],
    fault: ["stream_error", { first: 1 }, { afterTokens: 0 }],
    fallback: true,
  },
  {
    name: "error_event_after_first_token",
    modes: ["stream"],
    fault: ["stream_error", { first: 1 }, { afterTokens: 2 }],
    fallback: true,
  },
  {
    name: "stall_before_first_token",
    modes: ["stream"],
    fault: ["stream_stall", { first: 1 }, { afterTokens: 0 }],
    fallback: true,
    options: { firstTokenMs: STALL_LIMIT_MS },
  },
  {
    name: "stall_after_first_token",
    modes: ["stream"],
    fault: ["stream_stall", { first: 1 }, { afterTokens: 2 }],
    fallback: true,
    options: { idleMs: STALL_LIMIT_MS },
  },
  {
    name: "finish_length",
    modes: ["plain", "stream"],
    fault: ["finish_length", { first: 1 }, { afterTokens: 2 }],
    fallback: true,
  },
  {
    name: "finish_length_before_first_token",
    modes: ["stream"],
    fault: ["finish_length", { first: 1 }, { afterTokens: 0 }],
    fallback: true,
  },
];

/** An error as the test reads it: its class, selfheal's code, whether the SDK made it, its cause. */
function described(error, sdk) {
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  return {
    name: error.constructor.name,
    sdk: sdk.isError(error),
    ...(typeof error.code === "string" && { code: error.code }),
    ...(typeof error.status === "number" && { status: error.status }),
    ...(typeof error.pattern === "string" && { pattern: error.pattern }),
    message: error.message.slice(0, 300),
    ...(error.cause !== undefined && { cause: described(error.cause, sdk) }),
  };
}

/** One scenario in one mode (`plain` or `stream`): what the caller got, and what the servers saw. */
async function runOne(sdk, scenario, mode) {
  const primary = await startFakeProvider({ tokenIntervalMs: 0 });
  const backup = scenario.fallback ? await startFakeProvider({ tokenIntervalMs: 0 }) : undefined;
  const [kind, trigger, faultOptions] = scenario.fault;
  primary.injector.inject(kind, trigger, faultOptions);
  const sh = createSelfHealing({
    agent: `${sdk.name}-${scenario.name}-${mode}`,
    ...(backup && { recovery: { providers: [{ name: sdk.provider }, { name: "backup" }] } }),
  });
  const calls = [];
  const recoveries = [];
  sh.on("tool-call", (e) => calls.push({ tool: e.tool, outcome: e.outcome }));
  sh.on("recovery", (e) =>
    recoveries.push({
      pattern: e.pattern,
      outcome: e.outcome,
      strategy: e.strategy,
      provider: e.provider,
      steps: e.steps.map((s) => (s.skipped ? `${s.strategy} (skipped)` : s.strategy)),
    }),
  );
  let text = "";
  let restarts = 0;
  const healed = sdk.heal(sh, sdk.make(primary), {
    ...scenario.options,
    ...(backup && { fallback: { provider: "backup", client: sdk.make(backup) } }),
    ...(scenario.options?.afterFirstToken === "restart" && {
      onRestart: () => {
        restarts++;
        text = "";
      },
    }),
  });
  const result = { client: sdk.name, scenario: scenario.name, mode };
  try {
    if (mode === "plain") {
      const answer = await sdk.plain(healed);
      text = sdk.text(answer);
      result.finish = sdk.finish(answer);
    } else {
      const stream = await sdk.stream(healed);
      for await (const chunk of stream) text += sdk.chunkText(chunk);
    }
    result.answered = true;
  } catch (error) {
    result.answered = false;
    result.error = described(error, sdk);
  }
  await sh.close();
  await Promise.all([primary.close(), backup?.close()]);
  return {
    ...result,
    text,
    restarts,
    requests: { primary: primary.requests, backup: backup?.requests ?? 0 },
    calls,
    recoveries,
  };
}

/** Every scenario of SCENARIOS in each of its modes, at once; prints the results as one JSON line. */
export async function harness(sdk) {
  const runs = SCENARIOS.flatMap((scenario) =>
    scenario.modes.map((mode) => runOne(sdk, scenario, mode)),
  );
  process.stdout.write(JSON.stringify(await Promise.all(runs)) + "\n");
}
