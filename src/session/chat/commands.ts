/**
 * Chat commands (SPEC §12): standalone messages a person sends to control their session rather
 * than to talk to the agent. `parseCommand` (pure) recognizes them; `runCommand` carries one
 * out in the session's actor, answers the inbound with `status: "command"` and posts its
 * answer as a `notice` (under send policy) to the chat the command came from. Commands never
 * enter the transcript (a compaction run appends its compaction entry). Reset triggers (`/new`, `/reset`) are not here: they start a run (the
 * greeting turn) and live in admission.
 *
 * - `/stop` aborts the current run, clears waiting runs and the sub-agent runs this session spawned.
 * - `/status` posts the status card.
 * - `/compact [instructions]` queues a compaction run (see compactor.ts), which posts its notice.
 * - `/context list|detail` posts what the next model call carries (see context-report.ts).
 * - `/send on|off|inherit` sets the session's send-policy override; owners only (`commands.owners`,
 *   or any operator RPC message). Its confirmation is posted if either the old or the new policy
 *   allows it, so an owner always hears back once, and a session that stays closed stays silent.
 * - `/queue [mode]` shows or sets the session's queue mode (SPEC §20).
 * - `/usage [off|tokens|full|cost]` shows or sets the footer of the session's replies, or posts
 *   what the session and its agent have cost (SPEC §21; usage.ts).
 */

import type { Config } from "../../config/schema";
import type { DeliveryContext } from "../../db/json-columns";
import type { SessionRow } from "../../db/queries";
import { isCommandOwner } from "../../policy/owners";
import type { EnqueueRequest, EnqueueResult } from "../../runs/types";
import { VERSION } from "../../version";
import { statusCard, statusCardText } from "../../views/status-card";
import { actorFor } from "../client";
import { type ContextReportHost, contextReportText, gatherContextReport } from "../context/report";
import type { ActorRecords } from "../d1/records";
import { entryExpiry, isStale } from "../entry/rules";
import { duplicateOf, entryForRequest } from "../run/admission";
import type { LiveRun } from "../run/live";
import type { RunQueue } from "../run/queue";
import type { ActorStore } from "../storage/store";
import { type ChatPost, type PostHost, queueDelivery } from "./posts";
import { costText, USAGE_MODES, type UsageMode } from "./usage";

/** What chat commands use of the actor, and the two things they ask of its runs. */
export interface CommandHost extends PostHost, ContextReportHost {
  readonly env: Env;
  readonly config: Config;
  readonly store: Pick<ActorStore, "accepted" | "entry" | "saveEntry" | "keepAnswer" | "signals">;
  readonly queue: Pick<RunQueue, "rows">;
  readonly live: Pick<LiveRun, "current">;
  readonly records: Pick<ActorRecords, "entryPatched" | "sessionStarted" | "spawnedChildren" | "turnContext">;
  /** Admits a run into this session (`/compact` queues one). */
  admit(req: EnqueueRequest): Promise<EnqueueResult>;
  /** Aborts this session's running run and drops its waiting ones; returns how many. */
  stop(): Promise<number>;
}

const SEND_MODES = { on: "allow", off: "deny", inherit: null } as const;
/** `/compact` instructions beyond this many characters are cut. */
const MAX_COMPACT_INSTRUCTIONS = 2_000;
type SendMode = keyof typeof SEND_MODES;
const QUEUE_MODES = ["followup", "collect", "steer", "interrupt"] as const;
type QueueMode = (typeof QUEUE_MODES)[number];

export type Command =
  | { name: "stop" }
  | { name: "status" }
  | { name: "send"; mode: SendMode | undefined }
  | { name: "compact"; instructions: string | undefined }
  | { name: "context"; view: "list" | "detail" | undefined }
  /** `/queue` shows the mode; `/queue <mode>` sets it (`mode` undefined: not a mode, the usage). */
  | { name: "queue"; mode: QueueMode | "show" | undefined }
  /** `/usage` shows the footer mode; `/usage off|tokens|full` sets it; `/usage cost` answers once. */
  | { name: "usage"; mode: UsageMode | "show" | undefined };

/** The command a message is, if it is one (case-insensitive, surrounding space ignored). */
export function parseCommand(text: string): Command | undefined {
  const [head = "", ...rest] = text.trim().split(/\s+/);
  switch (head.toLowerCase()) {
    case "/stop":
      return rest.length === 0 ? { name: "stop" } : undefined;
    case "/status":
      return rest.length === 0 ? { name: "status" } : undefined;
    case "/compact": {
      const instructions = text.trim().slice(head.length).trim();
      return { name: "compact", instructions: instructions || undefined };
    }
    case "/context": {
      const arg = rest.length <= 1 ? (rest[0]?.toLowerCase() ?? "list") : undefined;
      return { name: "context", view: arg === "list" || arg === "detail" ? arg : undefined };
    }
    case "/queue": {
      const arg = rest.length === 0 ? "show" : rest.length === 1 ? rest[0]?.toLowerCase() : undefined;
      const mode =
        arg === "show" || QUEUE_MODES.includes(arg as QueueMode) ? (arg as QueueMode | "show") : undefined;
      return { name: "queue", mode };
    }
    case "/usage": {
      const arg = rest.length === 0 ? "show" : rest.length === 1 ? rest[0]?.toLowerCase() : undefined;
      const mode =
        arg === "show" || USAGE_MODES.includes(arg as UsageMode) ? (arg as UsageMode | "show") : undefined;
      return { name: "usage", mode };
    }
    case "/send": {
      // Any `/send …` is the command: a wrong argument gets the usage, never a model turn.
      const arg = rest.length === 1 ? rest[0]?.toLowerCase() : undefined;
      return { name: "send", mode: arg && Object.hasOwn(SEND_MODES, arg) ? (arg as SendMode) : undefined };
    }
    default:
      return undefined;
  }
}

/**
 * `/steer <text>` (SPEC §20): the text steers the running turn whatever the queue mode (or
 * queues, when nothing runs). Not a command of its own: the request, rewritten.
 */
export function steerOf(req: EnqueueRequest): EnqueueRequest | undefined {
  const only = req.userInteraction && req.inputs.length === 1 ? req.inputs[0] : undefined;
  const match = only ? /^\s*\/steer\s+(\S[\s\S]*)$/i.exec(only.text) : null;
  if (!only || !match?.[1]) return undefined;
  return { ...req, inputs: [{ ...only, text: match[1].trim() }], steer: true };
}

/** The command carried by a request, when it is a person's single message. */
export function commandOf(req: EnqueueRequest): Command | undefined {
  const only = req.userInteraction && req.inputs.length === 1 ? req.inputs[0] : undefined;
  return only ? parseCommand(only.text) : undefined;
}

/** What a command posts, and the entry whose send policy decides whether it may be posted. */
interface Answer {
  text: string;
  /** Entries under whose policy the notice may go out (the first that allows it is used). */
  policyOf: (SessionRow | undefined)[];
}

export async function runCommand(
  a: CommandHost,
  req: EnqueueRequest,
  command: Command,
): Promise<EnqueueResult> {
  if (command.name === "compact") return compactCommand(a, req, command.instructions);
  const duplicate = duplicateOf(a, req.runId);
  if (duplicate) return duplicate;
  // SPEC §4's order holds for commands too: the entry exists, with the route recorded and its
  // freshness applied, before the command acts on it (`/send off` as a first message sticks).
  const now = Date.now();
  const { entry, created, reset } = entryForRequest(a, req, now);
  entry.updatedAt = now;
  entry.expiresAt = entryExpiry(entry, a.config);
  a.store.saveEntry(entry);
  const result = {
    ok: true as const,
    runId: req.runId,
    sessionKey: req.sessionKey,
    sessionId: entry.sessionId,
    status: "command" as const,
  };
  a.store.keepAnswer(req.runId, result, now);
  if (created || reset) await a.records.sessionStarted(entry, now);
  else await a.records.entryPatched(entry);
  let answer: Answer;
  switch (command.name) {
    case "stop":
      answer = { text: await stop(a, req), policyOf: [entry] };
      break;
    case "status":
      answer = { text: status(a, entry), policyOf: [entry] };
      break;
    case "send":
      answer = await send(a, req, entry, command.mode);
      break;
    case "context":
      answer = { text: await context(a, entry, command.view), policyOf: [entry] };
      break;
    case "queue":
      answer = await queueMode(a, entry, command.mode);
      break;
    case "usage":
      answer = await usageMode(a, entry, command.mode);
      break;
  }
  // The notice answers the chat the command came from; an operator message without delivery gets none.
  const route = req.route ?? (req.deliver ? (entry.deliveryContext ?? undefined) : undefined);
  if (route) await postNotice(a, `${req.runId}:notice`, answer, route, req.sessionKey);
  return result;
}

async function postNotice(
  a: CommandHost,
  deliveryId: string,
  answer: Answer,
  route: DeliveryContext,
  sessionKey: string,
): Promise<void> {
  const out: ChatPost = { kind: "notice", text: answer.text };
  const allowedUnder = answer.policyOf.find((e) => a.outbox.payload(deliveryId, out, route, e, sessionKey));
  // When no policy in play allows it, queueDelivery finds it blocked and records nothing.
  await queueDelivery(a, deliveryId, out, route, allowedUnder ?? answer.policyOf[0], sessionKey);
}

/** `/stop`: aborts the current run, clears waiting runs, aborts sub-agent runs this session spawned. */
async function stop(a: CommandHost, req: EnqueueRequest): Promise<string> {
  const own = await a.stop();
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
  return `Stopped ${plural(own, "run")} in this session and ${plural(subRuns, "sub-agent run")}.`;
}

/** `/status`: the status card of this session. */
function status(a: CommandHost, entry: SessionRow): string {
  const rows = a.queue.rows();
  const queue = { waiting: rows.filter((r) => r.state === "queued").length, running: !!a.live.current };
  const card = statusCard(entry, entry.key, queue, a.config);
  const now = Date.now();
  return statusCardText(card, {
    version: VERSION,
    timezone: a.config.session.timezone,
    expired: isStale(entry, a.config, now),
  });
}

/**
 * `/compact [instructions]`: queues a compaction run (an ordinary run of this session, trigger
 * `compact`); the inbound is answered with `status: "command"` and that run's id, and the
 * run posts its notice when done.
 */
async function compactCommand(
  a: CommandHost,
  req: EnqueueRequest,
  instructions: string | undefined,
): Promise<EnqueueResult> {
  const result = await a.admit({
    ...req,
    trigger: "compact",
    inputs: [],
    userInteraction: false,
    compact: instructions ? { instructions: instructions.slice(0, MAX_COMPACT_INSTRUCTIONS) } : {},
  });
  return result.ok && result.status === "queued" ? { ...result, status: "command" } : result;
}

/** `/context list|detail`: what the next model call carries, with token estimates. */
async function context(
  a: CommandHost,
  entry: SessionRow,
  view: "list" | "detail" | undefined,
): Promise<string> {
  if (view === undefined) return "Usage: /context [list|detail]";
  return contextReportText(await gatherContextReport(a, entry), view === "detail");
}

/** `/send on|off|inherit`: the session's send-policy override, for owners. */
/** A setting a person changed with a command, in the signal log (SPEC §20); the new stateVersion. */
function settingsChanged(a: CommandHost, summary: string, at: number): number {
  return a.store.signals.record({ kind: "settings_changed", actor: "human", at, summary });
}

/** `/queue [mode]`: shows or sets what a message does while a run of this session runs (SPEC §20). */
async function queueMode(
  a: CommandHost,
  entry: SessionRow,
  mode: QueueMode | "show" | undefined,
): Promise<Answer> {
  const current = entry.queueMode ?? a.config.session.queue.mode;
  if (mode === undefined) return { text: `Usage: /queue ${QUEUE_MODES.join("|")}`, policyOf: [entry] };
  if (mode === "show") {
    const from = entry.queueMode ? "set with /queue" : "the gateway's session.queue.mode";
    return { text: `Queue mode: ${current} (${from}).`, policyOf: [entry] };
  }
  const updatedAt = Date.now();
  const stateVersion = settingsChanged(a, `queue mode: ${mode}`, updatedAt);
  const next: SessionRow = { ...entry, queueMode: mode, updatedAt, stateVersion };
  await a.records.entryPatched(next);
  // Re-read: a run may have changed the entry while D1 was being written.
  a.store.saveEntry({ ...(a.store.entry() ?? entry), queueMode: mode, updatedAt, stateVersion });
  return { text: `Queue mode: ${mode} for this session.`, policyOf: [entry] };
}

async function usageMode(
  a: CommandHost,
  entry: SessionRow,
  mode: UsageMode | "show" | undefined,
): Promise<Answer> {
  if (mode === undefined) return { text: `Usage: /usage ${USAGE_MODES.join("|")}`, policyOf: [entry] };
  if (mode === "show") return { text: `Usage footer: ${entry.usageMode ?? "off"}.`, policyOf: [entry] };
  if (mode === "cost") {
    return { text: await costText(a.env, entry, a.config.session.timezone, Date.now()), policyOf: [entry] };
  }
  const usageMode = mode === "off" ? null : mode;
  const updatedAt = Date.now();
  const next: SessionRow = { ...entry, usageMode, updatedAt };
  await a.records.entryPatched(next);
  a.store.saveEntry({ ...(a.store.entry() ?? entry), usageMode, updatedAt });
  return { text: `Usage footer: ${mode} for this session.`, policyOf: [entry] };
}

async function send(
  a: CommandHost,
  req: EnqueueRequest,
  entry: SessionRow,
  mode: SendMode | undefined,
): Promise<Answer> {
  if (mode === undefined) return { text: "Usage: /send on|off|inherit", policyOf: [entry] };
  const owner = req.trigger === "rpc" || (req.sender !== undefined && isCommandOwner(req.sender, a.config));
  if (!owner) {
    return {
      text: "Only an owner can change this session's send policy (commands.owners).",
      policyOf: [entry],
    };
  }
  const sendPolicy = SEND_MODES[mode];
  const updatedAt = Date.now();
  const stateVersion = settingsChanged(a, `send policy: ${mode}`, updatedAt);
  const next: SessionRow = { ...entry, sendPolicy, updatedAt, stateVersion };
  await a.records.entryPatched(next);
  // Re-read: a run may have changed the entry while D1 was being written.
  a.store.saveEntry({ ...(a.store.entry() ?? entry), sendPolicy, updatedAt, stateVersion });
  const text =
    mode === "inherit"
      ? "Send policy: inherited from the gateway's rules again."
      : `Send policy: ${mode} (${sendPolicy}) for this session.`;
  return { text, policyOf: [next, entry] };
}
