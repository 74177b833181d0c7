import { appendFile } from "node:fs/promises";
import { describeThrown, redact } from "../telemetry/redact.js";

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
    const line = `${JSON.stringify(event)}\n`;
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
