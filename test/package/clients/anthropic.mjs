/** `healAnthropic`'s Messages API (`messages.create`), plain and streamed: harness.mjs. */
import Anthropic from "@anthropic-ai/sdk";
import { healAnthropic } from "selfheal/anthropic";
import { harness } from "./harness.mjs";

const request = {
  model: "claude-test",
  max_tokens: 256,
  messages: [{ role: "user", content: "Hi" }],
};

await harness({
  name: "anthropic.messages",
  provider: "anthropic",
  make: (server) => new Anthropic({ apiKey: "sk-ant-test", baseURL: server.origin }),
  heal: healAnthropic,
  isError: (error) => error instanceof Anthropic.APIError,
  plain: (client) => client.messages.create(request),
  text: (message) =>
    message.content.map((block) => (block.type === "text" ? block.text : "")).join(""),
  finish: (message) => message.stop_reason,
  stream: (client) => client.messages.create({ ...request, stream: true }),
  chunkText: (event) =>
    event.type === "content_block_delta" && event.delta.type === "text_delta"
      ? event.delta.text
      : "",
});
