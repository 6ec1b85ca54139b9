/**
 * The one inbound pipeline (SPEC §4) after a connector has verified and normalized a message:
 * resolve the agent and the session key, derive the run id (dedupe), and hand the message to
 * the session's actor, which records the route and origin, applies freshness and reset,
 * handles commands and queues the run. Both the signed bridge (`/hooks/inbound/:channel`) and
 * the platform connectors (`/connectors/:channel`) end here; the answer never waits for a model.
 */
import { accessOf } from "../config/connectors";
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";
import { type InboundMessage, mediaRefs, messageText } from "../connectors/inbound-message";
import { countRefusal, isPaired, offerPairingCode } from "../db/pairing";
import { type DeliveryPayload, postDelivery } from "../delivery/deliver";
import { statedSize } from "../delivery/media-fetch";
import { ApiError, actorError } from "../http/errors";
import { selectAgentId } from "../keys/agent-binding";
import { normalizeAccountId, normalizeAgentId } from "../keys/ids";
import { runIdFor } from "../keys/run-id";
import { resolveSessionKey, sessionKindOf, stripLegacyGroupPrefix } from "../keys/session-key";
import { decideAccess, newPairingCode, pairingNotice, type Refusal } from "../policy/access";

export interface InboundAccepted {
  ok: true;
  sessionKey: string;
  sessionId: string;
  runId: string;
  /** `steered`: the message joined the running run `runId` (session.queue.mode steer). */
  status: "queued" | "duplicate" | "command" | "steered";
}

/** A message the connector's access rules refused: never a turn (SPEC §18 "Access"). */
export interface InboundRefused {
  ok: true;
  sessionKey: string;
  status: "refused";
  /** `too_large`: a file past `media.maxBytes` (SPEC §22): a notice, never a run. */
  reason: Refusal | "too_large";
}

/** What a connector knows of a message beyond SPEC §4's fields. */
export interface InboundContext {
  /** The platform's id of the message a reply answers (default: the messageId). */
  replyTo?: string;
  /** What the connector's sender needs to answer it (an interaction token), kept out of D1. */
  replyContext?: string;
  /** Where the chat's posts go when that is not its peer or group id (a Discord DM's channel). */
  postTo?: string;
  /** The message mentions the bot or replies to it (`groups.requireMention`). */
  mentioned?: boolean;
  /** Work that may outlast the answer (a pairing notice). */
  waitUntil(work: Promise<unknown>): void;
}

export async function acceptInbound(
  env: Env,
  config: Config,
  channel: string,
  msg: InboundMessage,
  target: InboundContext,
): Promise<InboundAccepted | InboundRefused> {
  const accountId = normalizeAccountId(msg.accountId);
  const peerId = msg.chatType === "direct" ? msg.from : stripLegacyGroupPrefix(msg.groupId ?? "");
  let agentId: string;
  if (msg.agentId) {
    agentId = normalizeAgentId(msg.agentId);
    const ids = config.agents.list.map((a) => a.id);
    if (ids.length && !ids.includes(agentId)) {
      throw new ApiError(
        "INVALID_REQUEST",
        `\`agentId\` "${msg.agentId}" is not a configured agent (known: ${ids.join(", ")})`,
      );
    }
  } else {
    agentId = selectAgentId(
      { channel, accountId, peer: { kind: msg.chatType, id: peerId } },
      config.bindings,
      config.agents.list,
    );
  }
  let sessionKey: string;
  try {
    sessionKey = resolveSessionKey(
      {
        agentId,
        channel,
        accountId,
        chatType: msg.chatType,
        from: msg.from,
        groupId: msg.groupId,
        threadId: msg.threadId,
        topic: msg.topic,
      },
      config.session,
    );
  } catch (error) {
    throw new ApiError("INVALID_REQUEST", error instanceof Error ? error.message : String(error));
  }

  // Who may talk to the connector (SPEC §18 "Access"): a refused message never reaches the session.
  const connector = ownEntry(config.connectors, channel);
  if (connector) {
    const reason = await decideAccess(
      {
        channel,
        chatType: msg.chatType,
        from: msg.from,
        groupId: peerId,
        mentioned: target.mentioned ?? false,
      },
      accessOf(connector),
      config,
      () => isPaired(env, channel, msg.from),
    );
    if (reason) {
      await refuse(env, config, { channel, accountId, sessionKey, msg, reason }, target);
      return { ok: true, sessionKey, status: "refused", reason };
    }
  }

  // Files (SPEC §22): with a store, the run fetches them; one the platform says is past
  // media.maxBytes gets a notice and no run (a platform whose message does not size its file is
  // asked). Without a store they are lines of the text.
  const media = config.media.r2 ? mediaRefs(msg) : [];
  for (const m of media)
    if (m.ref && m.bytes === undefined) {
      const bytes = await statedSize(m.ref, { channel, accountId }, config, env);
      if (bytes !== undefined) m.bytes = bytes;
    }
  const tooLarge = media.find((m) => m.bytes !== undefined && m.bytes > config.media.maxBytes);
  if (tooLarge) {
    const to = target.postTo ?? (msg.chatType === "direct" ? msg.from : (msg.groupId ?? msg.from));
    const payload: DeliveryPayload = {
      deliveryId: `too-large:${channel}:${accountId}:${msg.messageId}`,
      kind: "notice",
      sessionKey,
      channel,
      accountId,
      to,
      ...(msg.threadId ? { threadId: msg.threadId } : {}),
      text: tooLargeNotice(tooLarge.name, tooLarge.bytes ?? 0, config.media.maxBytes),
      replyToMessageId: target.replyTo ?? msg.messageId,
      ...(target.replyContext ? { replyContext: target.replyContext } : {}),
    };
    target.waitUntil(postNotice(payload, config, env, "file-too-large notice"));
    return { ok: true, sessionKey, status: "refused", reason: "too_large" };
  }

  // Names its session (keys/run-id.ts): the run is recorded in D1 behind the ack, and a caller
  // may ask about it at once. The same message is the same run, so a repeat is a duplicate.
  const runId = await runIdFor(sessionKey, `inbound:${channel}:${accountId}:${msg.messageId}`);
  const now = Date.now();
  const to = msg.chatType === "direct" ? msg.from : (msg.groupId ?? "");
  const label = msg.conversationLabel ?? msg.groupSubject ?? msg.groupChannel ?? msg.senderName;
  const result = await env.SESSION_ACTOR.getByName(sessionKey).enqueue({
    sessionKey,
    runId,
    trigger: "inbound",
    inputs: [
      {
        text: media.length > 0 ? msg.text : messageText(msg),
        ...(media.length > 0 ? { media } : {}),
        provenance: { kind: "external_user", sourceChannel: channel },
        messageId: msg.messageId,
        ...(msg.senderName ? { senderName: msg.senderName } : {}),
        timestamp: msg.timestamp ?? now,
      },
    ],
    deliver: true,
    route: {
      channel,
      accountId,
      to,
      ...(msg.threadId ? { threadId: msg.threadId } : {}),
      ...(target.postTo ? { postTo: target.postTo } : {}),
      replyToMessageId: target.replyTo ?? msg.messageId,
      ...(target.replyContext ? { replyContext: target.replyContext } : {}),
    },
    origin: {
      label,
      provider: channel,
      from: msg.from,
      to: msg.to,
      accountId,
      threadId: msg.threadId,
    },
    init: {
      agentId,
      kind: sessionKindOf(sessionKey, config.session),
      chatType: msg.chatType,
      channel,
      displayName: msg.chatType === "direct" ? (msg.conversationLabel ?? msg.senderName) : label,
      subject: msg.groupSubject,
    },
    userInteraction: true,
    hasThread: !!msg.threadId,
    sender: { channel, id: msg.from },
    inbound: { channel, accountId, messageId: msg.messageId },
  });
  if (!result.ok) throw actorError(result);
  return { ok: true, sessionKey, sessionId: result.sessionId, runId: result.runId, status: result.status };
}

/** How many times a pairing notice is tried, and the longest wait between tries. */
const NOTICE_TRIES = 3;
const NOTICE_WAIT_MAX_MS = 5_000;

/**
 * A refused message is counted (`status`), and a sender refused for pairing gets one notice with
 * a code an operator can approve, posted after the answer (a code already pending was noticed).
 */
async function refuse(
  env: Env,
  config: Config,
  r: { channel: string; accountId: string; sessionKey: string; msg: InboundMessage; reason: Refusal },
  target: InboundContext,
): Promise<void> {
  const now = Date.now();
  await countRefusal(env, r.channel, r.reason, now);
  if (r.reason !== "pairing") return;
  const code = await offerPairingCode(env, {
    channel: r.channel,
    accountId: r.accountId,
    peerId: r.msg.from,
    code: newPairingCode(),
    now,
  });
  if (!code) return;
  const payload: DeliveryPayload = {
    deliveryId: `pairing:${r.channel}:${code}`,
    kind: "notice",
    sessionKey: r.sessionKey,
    channel: r.channel,
    accountId: r.accountId,
    to: target.postTo ?? r.msg.from,
    text: pairingNotice(code),
    replyToMessageId: target.replyTo ?? r.msg.messageId,
  };
  if (target.replyContext) payload.replyContext = target.replyContext;
  target.waitUntil(postNotice(payload, config, env, "pairing notice"));
}

/**
 * Posts a notice that answers a message no run will (a pairing code, a file too large), a few
 * times at most: nothing durable waits on it, and the person can send again.
 */
async function postNotice(payload: DeliveryPayload, config: Config, env: Env, what: string): Promise<void> {
  for (let tries = 1; ; tries++) {
    const sent = await postDelivery(payload, config, env);
    if (sent.ok) return;
    if (sent.permanent || tries >= NOTICE_TRIES) {
      console.error(`${what} to ${payload.channel}:${payload.to} not sent: ${sent.error}`);
      return;
    }
    await new Promise((resolve) =>
      setTimeout(resolve, Math.min(sent.retryAfterMs ?? 1000 * tries, NOTICE_WAIT_MAX_MS)),
    );
  }
}

/** What a person hears of a file past media.maxBytes. */
export function tooLargeNotice(name: string | undefined, bytes: number, max: number): string {
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `⚠️ ${name ? `"${name}"` : "That file"} is too large (${mb(bytes)}; the limit is ${mb(max)}), so it was not passed on. Send a smaller one, or its text.`;
}
