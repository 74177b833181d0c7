/**
 * Shell arguments for a line a person pastes (`selfheal watch --stage-stall-ms STAGE=MS ...`):
 * quoted for POSIX shells, so a name from the log is one argument and nothing in it runs.
 */
import { oneLine } from "../telemetry/redact.js";

/** Characters no POSIX shell gives a meaning to: an argument made of them needs no quotes. */
const PLAIN = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * `arg` as one argument of a POSIX shell line: as is when plain, else in single quotes (inside
 * which nothing is special), each `'` written `'\''`. Undefined when no quoting makes it safe to
 * paste: it holds a NUL (no argument can), a line break (a paste would run the line early) or
 * anything else the terminal would show escaped (what is pasted would not be the name).
 */
export function shellQuote(arg: string): string | undefined {
  if (PLAIN.test(arg)) return arg;
  if (oneLine(arg) !== arg) return undefined;
  return `'${arg.replace(/'/g, "'\\''")}'`;
}
