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
  if (!res.ok) throw new Error(`${url} answered HTTP ${res.status}: ${text.slice(0, 200)}`);
}
