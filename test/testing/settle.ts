/** Event-loop helpers for the testing kit's suites: no clock decides anything. */

/** A few turns of the event loop: lets pending work run. */
export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** "pending", or how the promise settled, after a few turns of the event loop. */
export async function stateOf(promise: Promise<unknown>): Promise<unknown> {
  const seen: { value: unknown } = { value: "pending" };
  promise.then(
    (value: unknown) => {
      seen.value = { resolved: value };
    },
    (error: unknown) => {
      seen.value = { rejected: error };
    },
  );
  await turns();
  return seen.value;
}

/** Polls a condition on the event loop. */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
