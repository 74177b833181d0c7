/**
 * A streamed answer healed end to end, as docs/streams.md shows it: the OpenAI SDK
 * with `stream: true` against two local OpenAI-compatible servers (selfheal/testing), the
 * primary cutting its stream mid-answer, then stalling, then slow to its first token. The reader
 * drops what it showed at each StreamRestart and gets the whole answer from the fallback.
 * No API key, no network. Run: npx tsx examples/streams.ts
 */
import OpenAI from "openai";
import { createSelfHealing, isStreamRestart } from "selfheal";
import { chatCompletionChunks } from "selfheal/openai";
import { startFakeProvider } from "selfheal/testing";

const reply = "The refund policy allows returns within thirty days of delivery.";
const servers = {
  openai: await startFakeProvider({ reply, tokenIntervalMs: 10 }),
  backup: await startFakeProvider({ reply, tokenIntervalMs: 10 }),
};
/** The primary's fault for the next request. */
const faults = {
  "a cut": () => servers.openai.injector.inject("stream_cut", { first: 1 }, { afterTokens: 4 }),
  "a stall": () =>
    servers.openai.injector.inject(
      "stream_stall",
      { first: 1 },
      { afterTokens: 6, silentMs: 60_000 },
    ),
  "a slow first token": () =>
    servers.openai.injector.inject("slow_first_token", { first: 1 }, { delayMs: 60_000 }),
};

const clients = {
  openai: new OpenAI({ baseURL: servers.openai.url, apiKey: "sk-example", maxRetries: 0 }),
  backup: new OpenAI({ baseURL: servers.backup.url, apiKey: "sk-example", maxRetries: 0 }),
};
const sh = createSelfHealing({
  agent: "support-bot",
  recovery: { providers: [{ name: "openai" }, { name: "backup" }] },
});
sh.on("recovery", (e) => {
  console.log(
    `  recovery: ${e.pattern} -> ${e.steps.map((s) => s.strategy).join(" -> ")} => ${e.outcome}`,
  );
});
const answer = sh.stream(
  "answer",
  {
    readOnly: true,
    providers: ["openai", "backup"],
    format: chatCompletionChunks,
    // Short limits so the example runs in a second; docs/streams.md's for chat models are 10 s each.
    firstTokenMs: 1_000,
    idleMs: 1_000,
    afterFirstToken: "restart",
  },
  (messages: OpenAI.ChatCompletionMessageParam[], ctx) =>
    clients[ctx.provider as "openai" | "backup"].chat.completions.create(
      { model: "gpt-4o-mini", messages, stream: true },
      { signal: ctx.signal },
    ),
);

for (const [fault, inject] of Object.entries(faults)) {
  console.log(`${fault}:`);
  inject();
  const stream = answer([{ role: "user", content: "What is the refund policy?" }]);
  let text = "";
  for await (const item of stream) {
    if (isStreamRestart(item)) {
      console.log(`  shown so far: "${text}" -> restart (discard ${item.discard} chunks)`);
      text = "";
    } else text += item.choices[0]?.delta?.content ?? "";
  }
  const result = await stream.result;
  console.log(`  answer: "${text}" (${result.outcome} by ${result.provider})`);
}
console.log(`status: ${(await sh.status()).status}`);
await sh.close();
await Promise.all([servers.openai.close(), servers.backup.close()]);
