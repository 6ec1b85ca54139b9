/**
 * Budgets (SPEC §21): which budget, if any, an agent's spending has reached. Pure: the spend is
 * what the usage rollup recorded before the run plus what the run has cost so far; a model
 * call is not made once a budget is reached.
 */
import type { Budget } from "../config/agents";

export interface Spend {
  /** The agent, today and this month; the session, today (US dollars, priced calls). */
  agentDay: number;
  agentMonth: number;
  sessionDay: number;
}

export interface BudgetReached {
  name: "daily" | "monthly" | "session daily";
  limitUsd: number;
}

/** The first budget `spend` has reached (at or over), if any. */
export function budgetReached(budget: Budget | undefined, spend: Spend): BudgetReached | undefined {
  if (!budget) return undefined;
  if (budget.sessionDailyUsd !== undefined && spend.sessionDay >= budget.sessionDailyUsd)
    return { name: "session daily", limitUsd: budget.sessionDailyUsd };
  if (budget.dailyUsd !== undefined && spend.agentDay >= budget.dailyUsd)
    return { name: "daily", limitUsd: budget.dailyUsd };
  if (budget.monthlyUsd !== undefined && spend.agentMonth >= budget.monthlyUsd)
    return { name: "monthly", limitUsd: budget.monthlyUsd };
  return undefined;
}

/** What the chat hears: the budget, never another session's amounts. */
export function budgetNotice(agentId: string, reached: BudgetReached): string {
  const what =
    reached.name === "session daily"
      ? "this conversation's daily budget"
      : `the ${reached.name} budget of agent ${agentId}`;
  return `⚠️ ${what[0]?.toUpperCase()}${what.slice(1)} is used up; I cannot answer until it resets.`;
}

/** The agents at or over their daily or monthly budget (`status`), with what they spent. */
export function agentsOverBudget(
  budgets: ReadonlyArray<{ agentId: string; budget: Budget | undefined }>,
  spent: ReadonlyMap<string, { day: number; month: number }>,
): Array<{ agentId: string; budget: BudgetReached["name"]; limitUsd: number; spentUsd: number }> {
  const out: Array<{ agentId: string; budget: BudgetReached["name"]; limitUsd: number; spentUsd: number }> =
    [];
  for (const { agentId, budget } of budgets) {
    const s = spent.get(agentId) ?? { day: 0, month: 0 };
    const reached = budgetReached(budget && { ...budget, sessionDailyUsd: undefined }, {
      agentDay: s.day,
      agentMonth: s.month,
      sessionDay: 0,
    });
    if (reached) {
      out.push({
        agentId,
        budget: reached.name,
        limitUsd: reached.limitUsd,
        spentUsd: reached.name === "daily" ? s.day : s.month,
      });
    }
  }
  return out;
}
