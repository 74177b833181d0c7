/** Runs at least this long show hours in their times (`8:44:55`); shorter ones `mm:ss`. */
export const HOURS_FROM_MS = 100 * 60_000;

/**
 * Virtual time since a run's start as a clock: `mm:ss` (`05:12`, up to `99:59`), or `h:mm:ss`
 * (`8:44:55`) in a run of `runMs` that `mm:ss` cannot show in two digits of minutes.
 */
export function clockText(ms: number, runMs = 0): string {
  const s = Math.floor(Math.max(0, ms) / 1000);
  const two = (n: number) => String(n).padStart(2, "0");
  if (runMs < HOURS_FROM_MS) return `${two(Math.floor(s / 60))}:${two(s % 60)}`;
  return `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
}
