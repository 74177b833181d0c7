/** `healGoogleGenAI`'s `models.generateContent` and `generateContentStream`: harness.mjs. */
import { ApiError, GoogleGenAI } from "@google/genai";
import { healGoogleGenAI } from "selfheal/google-genai";
import { harness } from "./harness.mjs";

const request = { model: "gemini-test", contents: "Hi" };

await harness({
  name: "gemini.generate_content",
  provider: "gcp.gemini",
  make: (server) =>
    new GoogleGenAI({ apiKey: "test-key", httpOptions: { baseUrl: server.origin } }),
  heal: healGoogleGenAI,
  isError: (error) => error instanceof ApiError,
  plain: (ai) => ai.models.generateContent(request),
  text: (answer) => answer.text ?? "",
  finish: (answer) => answer.candidates?.[0]?.finishReason,
  stream: (ai) => ai.models.generateContentStream(request),
  chunkText: (chunk) => chunk.text ?? "",
});
