/**
 * Chat commands (SPEC §12): standalone messages a person sends to control their session rather
 * than to talk to the agent. `parseCommand` (pure) recognizes them; `runCommand` carries one
 * out in the session's actor and answers the inbound with `status: "command"`. Reset triggers
 * (`/new`, `/reset`) are not here: they start a run (the greeting turn) and live in admission.
 */
import type { DeliveryContext } from "../db/queries";
import type { EnqueueRequest, EnqueueResult } from "../runs/types";
import type { ActorContext } from "./actor-context";
import { duplicateOf } from "./admission";
import { actorFor } from "./client";
import { queueDelivery } from "./outbound";

export type Command = { name: "stop" };

/** The command a message is, if it is exactly one (case-insensitive, surrounding space ignored). */
export function parseCommand(text: string): Command | undefined {
  const words = text.trim().split(/\s+/);
  const [head = "", ...rest] = words;
  switch (head.toLowerCase()) {
    case "/stop":
      return rest.length === 0 ? { name: "stop" } : undefined;
    default:
      return undefined;
  }
}

/** The command carried by a request, when it is a person's single message. */
export function commandOf(req: EnqueueRequest): Command | undefined {
  const only = req.userInteraction && req.inputs.length === 1 ? req.inputs[0] : undefined;
  return only ? parseCommand(only.text) : undefined;
}

export async function runCommand(
  a: ActorContext,
  req: EnqueueRequest,
  command: Command,
): Promise<EnqueueResult> {
  const duplicate = duplicateOf(a, req.runId);
  if (duplicate) return duplicate;
  const entry = a.store.entry();
  const result = {
    ok: true as const,
    runId: req.runId,
    sessionKey: req.sessionKey,
    sessionId: entry?.sessionId ?? "",
    status: "command" as const,
  };
  a.store.recordAccepted(req.runId, result, Date.now());
  let text: string;
  switch (command.name) {
    case "stop":
      text = await stop(a, req);
      break;
  }
  const route = req.route ?? (entry?.deliveryContext as DeliveryContext | null) ?? undefined;
  if (route)
    await queueDelivery(a, `${req.runId}:notice`, { kind: "notice", text }, route, entry, req.sessionKey);
  return result;
}

/** `/stop`: aborts the current run, clears waiting runs, aborts sub-agent runs this session spawned. */
async function stop(a: ActorContext, req: EnqueueRequest): Promise<string> {
  const own = await a.abort(req.sessionKey, true);
  const children = await a.records.spawnedChildren(req.sessionKey);
  let subRuns = 0;
  await Promise.all(
    children
      .filter((c) => c.runStatus === "queued" || c.runStatus === "running")
      .map(async (c) => {
        const r = await actorFor(a.env, c.key).abort(c.key, true);
        subRuns += r.aborted;
      }),
  );
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  return `Stopped ${plural(own.aborted, "run")} in this session and ${plural(subRuns, "sub-agent run")}.`;
}
