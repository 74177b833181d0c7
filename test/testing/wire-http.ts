/** The wire tests' helpers: fake providers stopped after each test, raw requests, SSE events. */
import { afterEach } from "vitest";
import {
  startFakeProvider,
  type FakeProvider,
  type FakeProviderOptions,
} from "../../src/testing/index.js";

/** Starts providers (no pacing, reply "Hi there") that are closed after each test. */
export function useProviders(): (options?: FakeProviderOptions) => Promise<FakeProvider> {
  const providers: FakeProvider[] = [];
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
  });
  return async (options = {}) => {
    const p = await startFakeProvider({ tokenIntervalMs: 0, reply: "Hi there", ...options });
    providers.push(p);
    return p;
  };
}

export function post(
  p: FakeProvider,
  path: string,
  body: unknown,
  method = "POST",
): Promise<Response> {
  return fetch(`${p.origin}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(method === "GET" ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
}

export const USER = [{ role: "user", content: "hi" }];
export const RESPONSES = "/v1/responses";
export const MESSAGES = "/v1/messages";
export const GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent";
export const GEMINI_SSE = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
export const CONTENTS = [{ role: "user", parts: [{ text: "hi" }] }];

/** An SSE text's events: the `event:` name if any, and the parsed `data:`. */
export function events(
  text: string,
): { event: string | undefined; data: Record<string, unknown> }[] {
  return text
    .split(/\r\n\r\n|\n\n/)
    .filter((block) => block !== "")
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice("event: ".length);
      const data = lines.find((l) => l.startsWith("data: "))?.slice("data: ".length) ?? "null";
      return { event, data: JSON.parse(data) as Record<string, unknown> };
    });
}
