/** Processes the watch suites started, by pid. */

/** Whether a process with this pid runs (signal 0: nothing is sent). */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
