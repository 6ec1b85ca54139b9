/**
 * A turn's budget check (SPEC §21): what the agent and the session spent before the run, read
 * once from the usage rollup when the agent has a budget, plus what the run has cost so far,
 * checked before every model call (agent/loop.ts `beforeCall`); a reached budget refuses the
 * call and the run ends `budget_exceeded`. An operator's `overrideBudget` skips it. And the
 * chat's notice of it, once per session and day.
 */
import { budgetNotice, budgetReached } from "../../agent/budget";
import type { RunCheckpoint } from "../../agent/checkpoint";
import type { Budget } from "../../config/agents";
import type { Config } from "../../config/schema";
import { agentSpend } from "../../db/usage";
import type { EnqueueRequest } from "../../runs/types";
import { localDay } from "../../time/zones";
import type { ActorStore } from "../storage/store";

/** The check of a turn of agent `agentId`, or none when it has no budget or may pass it. */
export async function budgetGate(
  a: { readonly env: Env; readonly config: Config },
  req: EnqueueRequest,
  agentId: string,
  budget: Budget | undefined,
): Promise<((cp: RunCheckpoint) => string | undefined) | undefined> {
  if (!budget || req.overrideBudget) return undefined;
  const today = localDay(Date.now(), a.config.session.timezone);
  const before = await agentSpend(a.env, {
    agentId,
    sessionKey: req.sessionKey,
    today,
    monthStart: `${today.slice(0, 8)}01`,
  });
  return (cp) => {
    const run = cp.costUsd ?? 0;
    const reached = budgetReached(budget, {
      agentDay: before.agentDay + run,
      agentMonth: before.agentMonth + run,
      sessionDay: before.sessionDay + run,
    });
    return reached ? budgetNotice(agentId, reached) : undefined;
  };
}

/**
 * Whether the chat is to hear of a reached budget now: once per session and day, in `kv`.
 * `mark` records it, in the step that hands the notice to the outbox (a finalize repeated
 * after a crash before that step still posts it).
 */
export function budgetNoticeDue(
  store: Pick<ActorStore, "kvGet" | "kvSet">,
  timeZone: string,
  now: number,
): { due: boolean; mark(): void } {
  const today = localDay(now, timeZone);
  return { due: store.kvGet("budget_notice") !== today, mark: () => store.kvSet("budget_notice", today) };
}
