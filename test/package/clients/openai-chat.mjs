/** `healOpenAI`'s Chat Completions (`chat.completions.create`), plain and streamed: harness.mjs. */
import OpenAI from "openai";
import { healOpenAI } from "selfheal/openai";
import { harness } from "./harness.mjs";

const messages = [{ role: "user", content: "Hi" }];

await harness({
  name: "openai.chat",
  provider: "openai",
  make: (server) => new OpenAI({ apiKey: "sk-test", baseURL: server.url }),
  heal: healOpenAI,
  isError: (error) => error instanceof OpenAI.APIError,
  plain: (client) => client.chat.completions.create({ model: "gpt-test", messages }),
  text: (answer) => answer.choices[0]?.message.content ?? "",
  finish: (answer) => answer.choices[0]?.finish_reason,
  stream: (client) => client.chat.completions.create({ model: "gpt-test", messages, stream: true }),
  chunkText: (chunk) => chunk.choices[0]?.delta?.content ?? "",
});
