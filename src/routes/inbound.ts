/**
 * `POST /hooks/inbound/:channel` (SPEC §4): verify signature → validate → resolve agent and
 * session key → hand the message to the session's actor → 202. Never waits for the model.
 * Dedupe happens in the actor: the run id is derived from (channel, accountId, messageId).
 */
import { Hono } from "hono";
import { z } from "zod";
import { SIGNATURE_HEADER, verifySignature } from "../auth/signature";
import { loadConfig } from "../config/load";
import { ownEntry } from "../config/lookup";
import { ApiError, actorError, parseInput, parseJsonBody } from "../http/errors";
import { selectAgentId } from "../keys/agent-binding";
import { runIdFor } from "../keys/run-id";
import {
  normalizeAccountId,
  normalizeAgentId,
  normalizeChannel,
  resolveSessionKey,
  sessionKindOf,
  stripLegacyGroupPrefix,
} from "../keys/session-key";

const optionalText = z.string().max(1000).optional();

export const InboundMessage = z
  .strictObject({
    messageId: z.string().min(1).max(256),
    accountId: z.string().max(128).optional(),
    chatType: z.enum(["direct", "group", "channel"]),
    from: z.string().min(1).max(256),
    to: z.string().max(256).optional(),
    groupId: z.string().min(1).max(256).optional(),
    threadId: z.string().min(1).max(256).optional(),
    topic: z.boolean().optional(),
    text: z.string().max(200_000).default(""),
    attachments: z
      .array(
        z.strictObject({
          type: z.string().max(64).optional(),
          url: z.string().max(4096).optional(),
          name: z.string().max(512).optional(),
          mimeType: z.string().max(128).optional(),
        }),
      )
      .max(32)
      .optional(),
    senderName: optionalText,
    conversationLabel: optionalText,
    groupSubject: optionalText,
    groupChannel: optionalText,
    groupSpace: optionalText,
    agentId: z.string().min(1).max(64).optional(),
    timestamp: z.number().int().nonnegative().optional(),
  })
  .superRefine((m, ctx) => {
    if (m.chatType !== "direct" && !m.groupId) {
      ctx.addIssue({
        code: "custom",
        path: ["groupId"],
        message: `is required when chatType is "${m.chatType}"`,
      });
    }
    if (m.text.trim() === "" && !m.attachments?.length) {
      ctx.addIssue({
        code: "custom",
        path: ["text"],
        message: "must not be empty (unless attachments are sent)",
      });
    }
  });
export type InboundMessage = z.output<typeof InboundMessage>;

function messageText(m: InboundMessage): string {
  const lines = m.text ? [m.text] : [];
  for (const a of m.attachments ?? []) {
    lines.push(
      `[attachment${a.type ? ` ${a.type}` : ""}: ${a.name ?? "unnamed"}${a.mimeType ? ` (${a.mimeType})` : ""}${a.url ? ` ${a.url}` : ""}]`,
    );
  }
  return lines.join("\n");
}

export const inbound = new Hono<{ Bindings: Env }>().post("/:channel", async (c) => {
  const config = loadConfig(c.env);
  const channel = normalizeChannel(c.req.param("channel"));
  const connector = ownEntry(config.connectors, channel);
  // Nothing before the signature check tells the caller about the config: not the other
  // connectors, not the name of the missing secret (the status RPC and the logs do).
  if (!connector) {
    throw new ApiError("NOT_FOUND", `unknown channel "${channel}": no connector is configured for it`);
  }
  const secret = (c.env as unknown as Record<string, unknown>)[connector.secretEnv];
  if (typeof secret !== "string" || !secret) {
    console.error(
      `connector "${channel}" refused a request: its secret ${connector.secretEnv} is not set (wrangler secret put ${connector.secretEnv}, or .dev.vars locally)`,
    );
    throw new ApiError(
      "UNAVAILABLE",
      `connector "${channel}" is disabled until its secret is set (connectors.${channel}.secretEnv)`,
    );
  }
  const raw = await c.req.text();
  const check = await verifySignature(secret, c.req.header(SIGNATURE_HEADER), raw);
  if (!check.ok) throw new ApiError("UNAUTHORIZED", check.reason);
  const msg = parseInput(InboundMessage, parseJsonBody(raw));

  const accountId = normalizeAccountId(msg.accountId);
  if (connector.accounts && !connector.accounts.map((a) => normalizeAccountId(a)).includes(accountId)) {
    throw new ApiError(
      "FORBIDDEN",
      `accountId "${accountId}" is not configured for connector "${channel}" (allowed: ${connector.accounts.join(", ")})`,
    );
  }
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

  // Names its session (keys/run-id.ts): the run is recorded in D1 behind the ack, and a caller
  // may ask about it at once. The same message is the same run, so a repeat is a duplicate.
  const runId = await runIdFor(sessionKey, `inbound:${channel}:${accountId}:${msg.messageId}`);
  const now = Date.now();
  const to = msg.chatType === "direct" ? msg.from : (msg.groupId ?? "");
  const label = msg.conversationLabel ?? msg.groupSubject ?? msg.groupChannel ?? msg.senderName;
  const result = await c.env.SESSION_ACTOR.getByName(sessionKey).enqueue({
    sessionKey,
    runId,
    trigger: "inbound",
    inputs: [
      {
        text: messageText(msg),
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
      replyToMessageId: msg.messageId,
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
  return c.json(
    { ok: true, sessionKey, sessionId: result.sessionId, runId: result.runId, status: result.status },
    202,
  );
});
