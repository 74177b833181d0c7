/** Waiting in tests that run real servers and processes, without deciding on wall-clock time. */

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `condition` every 10 ms until it holds. The limit only ends a test that would never pass:
 * a busy machine may take seconds for what takes milliseconds on an idle one (issue 27).
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  ms = 30_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(10);
  }
}
