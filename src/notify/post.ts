import { redact } from "../telemetry/redact.js";

/**
 * Where a request went, for an error message: the origin only. A webhook's path and query are
 * often its secret (Slack's `/services/T…/B…/…`, tokens in query strings).
 */
function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "the notifier URL";
  }
}

/** POSTs a body and fails on a non-2xx answer; the caller's signal bounds it. */
export async function post(
  url: string,
  body: string,
  contentType: string,
  signal: AbortSignal,
  headers: Record<string, string> = {},
): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body,
    signal,
  });
  // Drain the body so the connection is reused; its text only matters in the error.
  const text = await res.text().catch(() => "");
  if (!res.ok) {
    throw new Error(`${origin(url)} answered HTTP ${res.status}: ${redact(text, 200)}`);
  }
}
