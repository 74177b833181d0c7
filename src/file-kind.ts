/**
 * What a path is, for the readers that take regular files only (the review's event logs, rule
 * files, the watchdog's heartbeat): a FIFO with no writer blocks whoever opens it, a device such
 * as /dev/zero never ends. They ask before reading and say what they found instead.
 */

/** The part of fs.Stats this needs (a Stats, a BigIntStats, a Dirent). */
export interface FileType {
  isFile(): boolean;
  isDirectory(): boolean;
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
}

/** What the path is: `a directory`, `a named pipe`, `a character device`, ... */
export function fileKind(stat: FileType): string {
  if (stat.isFile()) return "a regular file";
  if (stat.isDirectory()) return "a directory";
  if (stat.isFIFO()) return "a named pipe";
  if (stat.isCharacterDevice()) return "a character device";
  if (stat.isBlockDevice()) return "a block device";
  if (stat.isSocket()) return "a socket";
  return "not a file";
}

/** Undefined for a regular file; else why it is not read: `a named pipe, not a regular file`. */
export function notRegularFile(stat: FileType): string | undefined {
  return stat.isFile() ? undefined : `${fileKind(stat)}, not a regular file`;
}
