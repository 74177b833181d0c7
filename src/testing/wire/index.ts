/** The wire formats the fake provider speaks, chosen by the request's path. */
import { anthropicMessages } from "./anthropic.js";
import { chatCompletions } from "./chat-completions.js";
import { gemini } from "./gemini.js";
import { responses } from "./responses.js";
import type { PathMatch, WireApi } from "./types.js";

export const WIRE_APIS: readonly WireApi[] = [
  chatCompletions,
  responses,
  anthropicMessages,
  gemini,
];

/** The API a POST to `path` (no query string) is for, and what its path says; or undefined. */
export function routeOf(path: string): { api: WireApi; match: PathMatch } | undefined {
  for (const api of WIRE_APIS) {
    const match = api.match(path);
    if (match) return { api, match };
  }
  return undefined;
}

export type { Answer, PathMatch, StreamEvents, WireApi, WireApiName, WireReply } from "./types.js";
