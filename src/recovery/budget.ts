/** Spend of one task's recovery attempts, against its limit. */
export class RecoveryBudget {
  spentUsd = 0;

  constructor(readonly limitUsd: number) {}

  /** Whether an attempt expected to cost `usd` still fits. */
  allows(usd: number): boolean {
    return this.spentUsd + usd <= this.limitUsd + 1e-12;
  }

  spend(usd: number): void {
    this.spentUsd += usd;
  }
}

/**
 * Recovery budgets by task: a flapping dependency cannot run up a bill, because every retry and
 * failover of a task draws on the same budget. A call outside any task gets a budget of its own.
 */
export class RecoveryBudgets {
  private readonly byTask = new Map<string, RecoveryBudget>();

  constructor(private readonly limitUsd: number) {}

  /** The task's budget; a fresh one for calls outside a task. */
  for(taskId: string | undefined): RecoveryBudget {
    if (taskId === undefined) return new RecoveryBudget(this.limitUsd);
    let budget = this.byTask.get(taskId);
    if (!budget) {
      budget = new RecoveryBudget(this.limitUsd);
      this.byTask.set(taskId, budget);
    }
    return budget;
  }

  /** Forgets a finished task. */
  release(taskId: string): void {
    this.byTask.delete(taskId);
  }
}
