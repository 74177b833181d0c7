/**
 * Spend of one task's recovery attempts against its limit: a flapping dependency cannot run up a
 * bill, because every retry and failover of the task draws on it. A call outside any task gets
 * a budget of its own.
 */
export class RecoveryBudget {
  spentUsd = 0;

  constructor(
    readonly limitUsd: number,
    /** The fleet's record of this task's spend, when the task may move between workers. */
    private readonly shared?: { sync: BudgetSync; taskId: string },
  ) {}

  /** Whether an attempt expected to cost `usd` still fits. */
  allows(usd: number): boolean {
    return this.spentUsd + usd <= this.limitUsd + 1e-12;
  }

  spend(usd: number): void {
    this.spentUsd += usd;
    if (!this.shared || usd === 0) return;
    // The fleet's total comes back with each addition: spend made by other workers on this
    // task counts here from then on. Redis away: this worker's own count stands.
    this.shared.sync.add(this.shared.taskId, usd).then(
      (total) => {
        if (total > this.spentUsd) this.spentUsd = total;
      },
      () => undefined,
    );
  }
}

/**
 * A task's recovery spend kept by the fleet (`selfheal/redis`), so a task that moves between
 * workers keeps one budget.
 */
export interface BudgetSync {
  /** What the fleet has spent on `taskId` so far, USD. */
  spent(taskId: string): Promise<number>;
  /** Adds to it; resolves with the new total. */
  add(taskId: string, usd: number): Promise<number>;
}
