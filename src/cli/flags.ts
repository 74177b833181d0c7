/**
 * Every command's flags go through `parseFlags`: node:util's parseArgs, whose errors are usage
 * errors, with a suggestion for a misspelt flag (`--scenarios`: did you mean --scenario?) and, for
 * an unexpected positional argument, what the command takes instead.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

type Options = NonNullable<ParseArgsConfig["options"]>;
interface Config<O extends Options> {
  args: string[];
  options: O;
  strict: true;
  allowPositionals: boolean;
}

/** Farthest a misspelling may be from a flag (edits) for the flag to be suggested. */
const MAX_EDITS = 2;

/**
 * Edits (insert, delete, replace, swap two neighbours) from `a` to `b`, or MAX_EDITS + 1 once it
 * is more: a misspelling is a flag's length give or take two, so a long argument costs nothing.
 */
function edits(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > MAX_EDITS) return MAX_EDITS + 1;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] ?? [];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((above[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (above[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, (rows[i - 2]?.[j - 2] ?? 0) + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]?.[b.length] ?? MAX_EDITS + 1;
}

/**
 * The known flag closest to `given` (`--scenarios`, `-scenario`, `--Speed`), within MAX_EDITS
 * edits or a prefix of it (`--suggest`); undefined when none is close.
 */
export function closestFlag(given: string, options: Options): string | undefined {
  const name =
    given
      .replace(/^-{1,2}/, "")
      .split("=", 1)[0]
      ?.toLowerCase() ?? "";
  if (name === "") return undefined;
  let best: { flag: string; d: number } | undefined;
  for (const flag of Object.keys(options)) {
    const d = flag.startsWith(name) && name.length >= 3 ? 1 : edits(name, flag);
    if (d <= MAX_EDITS && (best === undefined || d < best.d)) best = { flag, d };
  }
  return best && `--${best.flag}`;
}

/** The unknown flag parseArgs names in its message (`Unknown option '--scenarios'`). */
const UNKNOWN = /^Unknown option '([^']*)'/;

/** What a command that takes no positional argument says of one (all of `args` from it on). */
type PositionalHint = (rest: string[]) => string;

/**
 * parseArgs over `args` (strict), its errors kept (codes ERR_PARSE_ARGS_*: exit 2) with a hint:
 * the closest known flag for an unknown one; for an unexpected argument, what `positionals` says
 * of it and the arguments after it.
 */
export function parseFlags<const O extends Options>(
  args: string[],
  options: O,
  hints: { positionals?: PositionalHint; allowPositionals?: boolean } = {},
): ReturnType<typeof parseArgs<Config<O>>> {
  const config: Config<O> = {
    args,
    options,
    strict: true,
    allowPositionals: hints.allowPositionals ?? false,
  };
  try {
    return parseArgs(config);
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    const { code } = error as { code?: unknown };
    const [first] = error.message.split(". ", 1);
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const given = UNKNOWN.exec(error.message)?.[1];
      const near = given === undefined ? undefined : closestFlag(given, options);
      if (near !== undefined) error.message = `${first ?? ""}: did you mean ${near}?`;
    } else if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL" && hints.positionals) {
      // Where the first positional starts (a flag's value is not one): the tokens say.
      const { tokens } = parseArgs({
        ...config,
        strict: false,
        allowPositionals: true,
        tokens: true,
      });
      const at = tokens.find((t) => t.kind === "positional")?.index ?? args.length;
      error.message = `${first ?? ""}: ${hints.positionals(args.slice(at))}`;
    }
    throw error;
  }
}
