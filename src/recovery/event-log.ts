import { appendFile } from "node:fs/promises";
import { describeThrown, redact } from "../telemetry/redact.js";

/**
 * Characters some JSONL readers take for line breaks (Python's `splitlines`, editors) that
 * JSON.stringify leaves raw inside strings; escaped, each event stays one line for every reader.
 */
const UNICODE_BREAKS = /[\u0085\u2028\u2029]/g;
const escapeBreak = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/**
 * Appends events to a JSONL file, in order, off the call path: a slow or failing disk delays
 * nothing and loses nothing but the lines it could not write (each failure is logged).
 */
export class JsonlLog {
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly path: string,
    private readonly logger: { warn(message: string): void },
  ) {}

  append(event: object): void {
    const line = `${JSON.stringify(event).replace(UNICODE_BREAKS, escapeBreak)}\n`;
    this.tail = this.tail.then(() =>
      appendFile(this.path, line).catch((error: unknown) => {
        this.logger.warn(
          `selfheal: could not append to ${this.path}: ${redact(describeThrown(error))}`,
        );
      }),
    );
  }

  /** Resolves once every appended line is written (or has failed). */
  flush(): Promise<void> {
    return this.tail;
  }
}
