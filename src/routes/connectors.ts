/**
 * `POST /connectors/:channel[/:accountId]` and WhatsApp's `GET` handshake (SPEC §18): a chat
 * platform's webhook. The connector of the channel verifies the request as its platform signs it
 * (401, and nothing stored, when it fails), normalizes what it holds to SPEC §4 messages, each
 * of which goes through the one inbound pipeline (access, keys, dedupe, queue), and the platform
 * gets the answer it expects within its deadline; runs happen after it.
 */
import { Hono } from "hono";
import type { PlatformConnectorConfig } from "../config/connectors";
import { loadConfig } from "../config/load";
import { ownEntry } from "../config/lookup";
import { accountWith } from "../connectors/registry";
import { postDelivery } from "../delivery/deliver";
import { ApiError, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import { normalizeChannel } from "../keys/ids";
import { acceptInbound } from "./inbound-pipeline";

/** The platform connector a request names, with its account and secrets, or the error to answer. */
function connectorFor(env: Env, channelParam: string, accountParam: string | undefined) {
  const config = loadConfig(env);
  const channel = normalizeChannel(channelParam);
  const connector = ownEntry(config.connectors, channel);
  // Nothing before verification says more of the config than whether this channel exists.
  if (!connector)
    throw new ApiError("NOT_FOUND", `unknown channel "${channel}": no connector is configured for it`);
  if (connector.type === "webhook") {
    throw new ApiError(
      "NOT_FOUND",
      `connector "${channel}" is a signed bridge: its webhook is POST /hooks/inbound/${channel}`,
    );
  }
  const accountId = accountParam ?? connector.accountId;
  const found = accountWith(connector, accountId, env);
  if (!found) throw new ApiError("NOT_FOUND", `connector "${channel}" has no account "${accountId}"`);
  if (found.missing.length) {
    const names = found.missing.map((m) => m.env).join(", ");
    console.error(
      `connector "${channel}" refused a request: ${names} not set (wrangler secret put <name>, or .dev.vars locally)`,
    );
    const paths = found.missing.map((m) => `connectors.${channel}.${m.path}`).join(", ");
    throw new ApiError(
      "UNAVAILABLE",
      `connector "${channel}" is disabled until its secrets are set (${paths})`,
    );
  }
  return { config, channel, connector: connector as PlatformConnectorConfig, accountId, ...found };
}

export const connectors = new Hono<{ Bindings: Env }>()
  .get(SURFACE.platform.path, (c) => {
    const { module, account, secrets } = connectorFor(
      c.env,
      c.req.param("channel"),
      c.req.param("accountId"),
    );
    if (!module.handshake)
      throw new ApiError("METHOD_NOT_ALLOWED", `this connector's webhook takes POST only`);
    const answer = module.handshake(new URL(c.req.url), account, secrets);
    return c.text(answer.body, answer.status as 200 | 403);
  })
  .post(SURFACE.platform.path, async (c) => {
    const { config, channel, accountId, module, account, secrets } = connectorFor(
      c.env,
      c.req.param("channel"),
      c.req.param("accountId"),
    );
    const raw = await c.req.text();
    const verified = await module.verify(
      { url: new URL(c.req.url), headers: c.req.raw.headers, raw, now: Date.now() },
      account,
      secrets,
    );
    if (!verified.ok) throw new ApiError("UNAUTHORIZED", verified.reason);
    let received: ReturnType<typeof module.receive>;
    try {
      received = module.receive(parseJsonBody(raw), account);
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw new ApiError("INVALID_REQUEST", error instanceof Error ? error.message : String(error));
    }
    const waitUntil = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
    // In order: a notification may hold several messages of one chat.
    for (const m of received.messages) {
      await acceptInbound(
        c.env,
        config,
        channel,
        { ...m.inbound, accountId },
        {
          mentioned: m.mentioned,
          waitUntil,
          ...(m.replyTo ? { replyTo: m.replyTo } : {}),
          ...(m.replyContext ? { replyContext: m.replyContext } : {}),
          ...(m.postTo ? { postTo: m.postTo } : {}),
        },
      );
    }
    for (const notice of received.notices ?? []) {
      // Not a turn: posted once, best effort, after the answer.
      waitUntil(
        postDelivery(
          {
            deliveryId: `notice:${channel}:${crypto.randomUUID()}`,
            kind: "notice",
            sessionKey: "",
            channel,
            accountId,
            to: notice.to,
            text: notice.text,
            ...(notice.threadId ? { threadId: notice.threadId } : {}),
          },
          config,
          c.env,
        ).then((sent) => {
          if (!sent.ok) console.error(`notice on ${channel} not sent: ${sent.error}`);
        }),
      );
    }
    const { status, body } = received.answer;
    if (body === undefined) return c.body(null, status as 200);
    return c.json(body, status as 200);
  });
