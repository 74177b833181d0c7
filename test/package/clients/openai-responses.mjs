/** `healOpenAI`'s Responses API (`responses.create`), plain and streamed: harness.mjs. */
import OpenAI from "openai";
import { healOpenAI } from "selfheal/openai";
import { harness } from "./harness.mjs";

await harness({
  name: "openai.responses",
  provider: "openai",
  make: (server) => new OpenAI({ apiKey: "sk-test", baseURL: server.url }),
  heal: healOpenAI,
  isError: (error) => error instanceof OpenAI.APIError,
  plain: (client) => client.responses.create({ model: "gpt-test", input: "Hi" }),
  text: (answer) => answer.output_text,
  finish: (answer) => answer.status,
  stream: (client) => client.responses.create({ model: "gpt-test", input: "Hi", stream: true }),
  chunkText: (event) => (event.type === "response.output_text.delta" ? event.delta : ""),
});
