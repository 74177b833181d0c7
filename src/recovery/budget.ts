/**
 * Spend of one task's recovery attempts against its limit: a flapping dependency cannot run up a
 * bill, because every retry and failover of the task draws on it. A call outside any task gets
 * a budget of its own.
 */
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
