/**
 * A bad invocation, or a setup the command cannot run in (an optional peer it needs is not
 * installed): one line on stderr, exit code 2.
 */
export class UsageError extends Error {}

/** A command that could not do its work (a server unreachable): one line on stderr, exit code 1. */
export class CommandFailedError extends Error {}
