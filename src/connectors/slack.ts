/**
 * Slack, through the Events API (SPEC §18; api.slack.com/apis/events-api): a request is signed
 * `v0=<hex HMAC-SHA256(signing secret, "v0:<timestamp>:<raw body>")>` with a timestamp within 5
 * minutes; `url_verification` answers its challenge; `message` events (im direct, mpim and
 * private channels group, public channels channel) and `app_mention` are messages, `thread_ts`
 * their thread. A post that arrives both as `message` and as `app_mention`, or again as a retry
 * (`X-Slack-Retry-Num`), is one message: its id is `<channel>:<ts>`. Bots (this one too),
 * edits and deletions are ignored. A post's files are attachments its run fetches from their
 * `url_private_download` with the bot token (SPEC §22), never from another host. Replies go
 * through `chat.postMessage`, in the thread, 4000
 * characters a message; `ok: false` is classified (rate limits after `Retry-After`,
 * `channel_not_found`/`not_in_channel` and the like dead at once).
 */
import { equalsSecret, hmacHex } from "../auth/signature";
import type { SlackConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";
import { brief, callApi, classifyStatus, isFailure, postParts, retryAfterHeader } from "./platform-api";
import { splitText } from "./split";
import type { Account, PlatformConnector, PlatformMessage, PreviewResult, Received, Secrets } from "./types";

export const SIGNATURE = "x-slack-signature";
export const TIMESTAMP = "x-slack-request-timestamp";
const MAX_SKEW_SECONDS = 300;
const MAX_CHARS = 4000;

/** `ok: false` errors that no retry can fix. */
const PERMANENT = new Set([
  "channel_not_found",
  "not_in_channel",
  "is_archived",
  "msg_too_long",
  "no_text",
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "token_revoked",
  "no_permission",
  "missing_scope",
  "restricted_action",
]);

interface SlackEvent {
  type?: string;
  subtype?: string;
  channel?: string;
  channel_type?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  files?: SlackFile[];
}

interface SlackFile {
  name?: string;
  mimetype?: string;
  size?: number;
  url_private?: string;
  url_private_download?: string;
}

type Attachment = NonNullable<InboundMessage["attachments"]>[number];

/** A post's files, as attachments fetched by their private URL. */
function attachmentsOf(e: SlackEvent): Attachment[] {
  const out: Attachment[] = [];
  for (const f of e.files ?? []) {
    const url = f.url_private_download ?? f.url_private;
    if (!url) continue;
    out.push({
      ref: url,
      ...(f.mimetype ? { mimeType: f.mimetype } : {}),
      ...(f.name ? { name: f.name } : {}),
      ...(f.size !== undefined ? { bytes: f.size } : {}),
    });
  }
  return out;
}

interface Envelope {
  type?: string;
  challenge?: string;
  event_id?: string;
  event?: SlackEvent;
}

type App = Account<SlackConfig>;

/** Message subtypes that are a person's post; every other subtype (edits, joins, bots) is not. */
const POSTS = new Set([undefined, "thread_broadcast", "file_share"]);

function chatTypeOf(e: SlackEvent): InboundMessage["chatType"] {
  const kind =
    e.channel_type ?? (e.channel?.startsWith("D") ? "im" : e.channel?.startsWith("G") ? "group" : "channel");
  if (kind === "im") return "direct";
  if (kind === "mpim" || kind === "group") return "group";
  return "channel";
}

/** The SPEC §4 message of an event, or undefined for one that is not a person's post. */
export function normalizeSlack(e: SlackEvent, app: App): PlatformMessage | undefined {
  if (e.type !== "message" && e.type !== "app_mention") return undefined;
  if (e.type === "message" && !POSTS.has(e.subtype)) return undefined;
  if (e.bot_id || !e.user || !e.channel || !e.ts) return undefined;
  if (app.botUserId && e.user === app.botUserId) return undefined;
  const text = e.text ?? "";
  const attachments = attachmentsOf(e);
  if (text.trim() === "" && attachments.length === 0) return undefined;
  const chatType = chatTypeOf(e);
  const inbound: InboundMessage = {
    messageId: `${e.channel}:${e.ts}`,
    chatType,
    from: e.user,
    text,
    ...(attachments.length > 0 ? { attachments } : {}),
  };
  if (chatType !== "direct") inbound.groupId = e.channel;
  if (e.thread_ts && e.thread_ts !== e.ts) inbound.threadId = e.thread_ts;
  const seconds = Number(e.ts);
  if (Number.isFinite(seconds)) inbound.timestamp = Math.floor(seconds * 1000);
  const mentioned = e.type === "app_mention" || (!!app.botUserId && text.includes(`<@${app.botUserId}>`));
  return { inbound, mentioned, replyTo: e.ts };
}

async function call(app: App, secrets: Secrets, method: string, body: unknown) {
  return callApi(`${app.apiBaseUrl.replace(/\/+$/, "")}/${method}`, {
    method: "POST",
    headers: {
      "content-type": "application/json; charset=utf-8",
      authorization: `Bearer ${secrets[app.botTokenEnv] ?? ""}`,
    },
    body: JSON.stringify(body),
  });
}

interface ApiResult {
  ok?: boolean;
  error?: string;
  user_id?: string;
  user?: string;
  team?: string;
  ts?: string;
}

/** A preview's call answered: its message's `ts`, or Slack's reason. */
function previewAnswer(
  a: Awaited<ReturnType<typeof call>>,
  method: string,
  ts: string | undefined,
): PreviewResult {
  if (isFailure(a)) return { ok: false, error: `Slack ${method}: ${a.error}` };
  const r = (a.json ?? {}) as ApiResult;
  const id = ts ?? r.ts;
  if (a.status >= 300 || !r.ok || !id)
    return { ok: false, error: `Slack ${method}: ${r.error ?? `answered ${a.status}`}` };
  return { ok: true, messageId: id };
}

export const slack: PlatformConnector<SlackConfig> = {
  type: "slack",
  maxChars: MAX_CHARS,

  secretNames: (app) => [
    { env: app.signingSecretEnv, path: "signingSecretEnv", required: true },
    { env: app.botTokenEnv, path: "botTokenEnv", required: true },
  ],

  async fileSource(ref, app, secrets) {
    // The bot token goes to Slack's file host only (or the API's own host, a local stand-in).
    let host: string;
    try {
      const url = new URL(ref);
      host = url.protocol === "https:" ? url.hostname : "";
    } catch {
      host = "";
    }
    const own = new URL(app.apiBaseUrl).hostname;
    if (!host || !(host === own || host === "slack.com" || host.endsWith(".slack.com")))
      return {
        ok: false,
        error: `a Slack file is fetched from Slack's own host only (got ${ref.slice(0, 80)})`,
        permanent: true,
      };
    return { ok: true, url: ref, headers: { authorization: `Bearer ${secrets[app.botTokenEnv] ?? ""}` } };
  },

  async verify(req, app, secrets) {
    const signature = req.headers.get(SIGNATURE);
    const ts = req.headers.get(TIMESTAMP);
    if (!signature || !ts) return { ok: false, reason: `missing ${SIGNATURE} or ${TIMESTAMP} header` };
    if (!/^\d+$/.test(ts)) return { ok: false, reason: `${TIMESTAMP} is not unix seconds` };
    const skew = Math.abs(req.now / 1000 - Number(ts));
    if (skew > MAX_SKEW_SECONDS) {
      return {
        ok: false,
        reason: `${TIMESTAMP} is ${Math.round(skew)}s away from now (max ${MAX_SKEW_SECONDS}s)`,
      };
    }
    const expected = `v0=${await hmacHex(secrets[app.signingSecretEnv] ?? "", `v0:${ts}:${req.raw}`)}`;
    return equalsSecret(signature.toLowerCase(), expected)
      ? { ok: true }
      : { ok: false, reason: `${SIGNATURE} does not match` };
  },

  receive(body, app): Received {
    if (typeof body !== "object" || body === null) throw new Error("not a Slack Events API payload");
    const envelope = body as Envelope;
    if (envelope.type === "url_verification") {
      if (typeof envelope.challenge !== "string") throw new Error("url_verification without a challenge");
      return { answer: { status: 200, body: { challenge: envelope.challenge } }, messages: [] };
    }
    const message =
      envelope.type === "event_callback" && envelope.event ? normalizeSlack(envelope.event, app) : undefined;
    return { answer: { status: 200 }, messages: message ? [message] : [] };
  },

  async send(out, app, secrets, onPart) {
    return postParts(
      splitText(out.text, MAX_CHARS),
      out.partsSent,
      async (text) => {
        const a = await call(app, secrets, "chat.postMessage", {
          channel: out.to,
          text,
          ...(out.threadId ? { thread_ts: out.threadId } : {}),
        });
        if (isFailure(a)) return a;
        const r = (a.json ?? {}) as ApiResult;
        const status = classifyStatus(
          a,
          "Slack chat.postMessage",
          brief(r.error ?? a.text),
          retryAfterHeader(a.headers),
        );
        if (status) return status;
        if (r.ok) return undefined;
        const error = `Slack chat.postMessage: ${r.error ?? "ok: false"}`;
        if (r.error === "ratelimited") {
          const wait = retryAfterHeader(a.headers);
          return { ok: false, error, ...(wait !== undefined ? { retryAfterMs: wait } : {}) };
        }
        return PERMANENT.has(r.error ?? "") ? { ok: false, error, permanent: true } : { ok: false, error };
      },
      onPart,
    );
  },

  // A preview is a message of its own, updated as the reply grows (SPEC §22).
  preview: {
    async show(target, text, ts, app, secrets) {
      if (ts)
        return previewAnswer(
          await call(app, secrets, "chat.update", { channel: target.to, ts, text }),
          "chat.update",
          ts,
        );
      const a = await call(app, secrets, "chat.postMessage", {
        channel: target.to,
        text,
        ...(target.threadId ? { thread_ts: target.threadId } : {}),
      });
      return previewAnswer(a, "chat.postMessage", undefined);
    },
    async remove(target, ts, app, secrets) {
      const a = await call(app, secrets, "chat.delete", { channel: target.to, ts });
      return !isFailure(a) && ((a.json ?? {}) as ApiResult).ok === true;
    },
  },

  async setup(webhookUrl) {
    return {
      ok: true,
      detail: [
        "Slack has no API to set this; in your app's settings (api.slack.com/apps):",
        `  Event Subscriptions → Request URL: ${webhookUrl}`,
        "  Subscribe to bot events: message.im, message.mpim, message.groups, message.channels, app_mention",
        "  OAuth & Permissions → Bot Token Scopes: chat:write, im:history, mpim:history, groups:history, channels:history, app_mentions:read",
        "  Install the app, then put its Bot User OAuth Token and Signing Secret with wrangler secret put.",
      ].join("\n"),
    };
  },

  async check(app, secrets) {
    const a = await call(app, secrets, "auth.test", {});
    if (isFailure(a)) return { ok: false, detail: `auth.test: ${a.error}` };
    const r = (a.json ?? {}) as ApiResult;
    if (!r.ok) return { ok: false, detail: `auth.test: ${r.error ?? `answered ${a.status}`}` };
    const mismatch =
      app.botUserId && r.user_id && r.user_id !== app.botUserId
        ? ` (config says botUserId "${app.botUserId}")`
        : "";
    return {
      ok: !mismatch,
      detail: `auth.test: the token is ${r.user ?? "a bot"} (${r.user_id}) in ${r.team ?? "a workspace"}${mismatch}`,
    };
  },
};
