/**
 * Webhook requests as each platform sends them, signed exactly as it signs them: Telegram's
 * secret token header, Slack's v0 HMAC over "v0:<ts>:<body>", Discord's Ed25519 over
 * timestamp + body (a real key pair: `DISCORD_TEST_KEY`), WhatsApp's `sha256=` HMAC of the body
 * with the app secret; and the payloads they post (an Update, an event callback, an interaction,
 * a notification). WebCrypto only, so workerd tests and Node end-to-end tests share them.
 */

const enc = new TextEncoder();
const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

async function hmac(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    enc.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return hex(await crypto.subtle.sign("HMAC", key, enc.encode(message)));
}

/** A test application's Ed25519 key pair (made for these tests; the public half goes in the config). */
export const DISCORD_TEST_KEY = {
  publicKey: "dd03ed61d42206a26c848f54898307c10d13ea52de79cd90d598314ad7a91921",
  privateKeyPkcs8: "MC4CAQAwBQYDK2VwBCIEIE5pxygRlGF9d8jcvYxB5s0Q9KYd6ZtGTxAmxr31Lhbf",
};

export interface SignedRequest {
  headers: Record<string, string>;
  body: string;
}

export function telegramRequest(update: unknown, secretToken: string): SignedRequest {
  return {
    headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secretToken },
    body: JSON.stringify(update),
  };
}

export async function slackRequest(
  payload: unknown,
  signingSecret: string,
  at = Date.now(),
): Promise<SignedRequest> {
  const body = JSON.stringify(payload);
  const ts = String(Math.floor(at / 1000));
  return {
    headers: {
      "content-type": "application/json",
      "x-slack-request-timestamp": ts,
      "x-slack-signature": `v0=${await hmac(signingSecret, `v0:${ts}:${body}`)}`,
    },
    body,
  };
}

let discordKey: Promise<CryptoKey> | undefined;

export async function discordRequest(interaction: unknown, at = Date.now()): Promise<SignedRequest> {
  discordKey ??= crypto.subtle.importKey(
    "pkcs8",
    Uint8Array.from(atob(DISCORD_TEST_KEY.privateKeyPkcs8), (c) => c.charCodeAt(0)),
    { name: "Ed25519" },
    false,
    ["sign"],
  );
  const body = JSON.stringify(interaction);
  const ts = String(Math.floor(at / 1000));
  const sig = await crypto.subtle.sign({ name: "Ed25519" }, await discordKey, enc.encode(ts + body));
  return {
    headers: {
      "content-type": "application/json",
      "x-signature-ed25519": hex(sig),
      "x-signature-timestamp": ts,
    },
    body,
  };
}

export async function whatsappRequest(notification: unknown, appSecret: string): Promise<SignedRequest> {
  const body = JSON.stringify(notification);
  return {
    headers: {
      "content-type": "application/json",
      "x-hub-signature-256": `sha256=${await hmac(appSecret, body)}`,
    },
    body,
  };
}

// ─── payloads ────────────────────────────────────────────────────────────────────────────────

let updateIds = 500_000;
let messageIds = 1;

/** A Telegram Update with a text message (private chat unless `chat` says otherwise). */
export function telegramUpdate(f: {
  from: number;
  text: string;
  chat?: { id: number; type: string; title?: string; is_forum?: boolean };
  threadId?: number;
  updateId?: number;
  replyToBot?: string;
}) {
  const chat = f.chat ?? { id: f.from, type: "private", first_name: "User" };
  return {
    update_id: f.updateId ?? updateIds++,
    message: {
      message_id: messageIds++,
      from: { id: f.from, is_bot: false, first_name: `User${f.from}` },
      chat,
      date: Math.floor(Date.now() / 1000),
      text: f.text,
      ...(f.threadId !== undefined ? { message_thread_id: f.threadId, is_topic_message: true } : {}),
      ...(f.replyToBot
        ? {
            reply_to_message: {
              message_id: 1,
              from: { id: 1, is_bot: true, username: f.replyToBot },
              chat,
              text: "earlier",
            },
          }
        : {}),
    },
  };
}

let slackEvents = 1;

/** A Slack event callback holding a `message` (or `app_mention`) event. */
export function slackEvent(f: {
  user: string;
  channel: string;
  channelType?: "im" | "mpim" | "group" | "channel";
  text: string;
  ts?: string;
  threadTs?: string;
  type?: "message" | "app_mention";
}) {
  const ts = f.ts ?? `${Math.floor(Date.now() / 1000)}.${String(slackEvents).padStart(6, "0")}`;
  return {
    token: "verification-token-unused",
    team_id: "T1",
    api_app_id: "A1",
    type: "event_callback",
    event_id: `Ev${slackEvents++}`,
    event_time: Math.floor(Date.now() / 1000),
    event: {
      type: f.type ?? "message",
      user: f.user,
      text: f.text,
      ts,
      channel: f.channel,
      ...(f.type === "app_mention" ? {} : { channel_type: f.channelType ?? "im" }),
      ...(f.threadTs ? { thread_ts: f.threadTs } : {}),
    },
  };
}

let interactions = 1;

/** A Discord APPLICATION_COMMAND interaction for `/<command> message:<text>`. */
export function discordCommand(f: {
  applicationId: string;
  user: string;
  text: string;
  channelId: string;
  guildId?: string;
  command?: string;
  token?: string;
  /** A file in the command's `attachment` option (data.resolved.attachments). */
  attachment?: { id: string; filename: string; size: number; url: string; content_type?: string };
}) {
  const id = `${1_200_000_000_000_000_000n + BigInt(interactions++)}`;
  const user = { id: f.user, username: `user${f.user.slice(-4)}`, global_name: null };
  return {
    id,
    application_id: f.applicationId,
    type: 2,
    token: f.token ?? `token-${id}`,
    version: 1,
    channel_id: f.channelId,
    channel: { id: f.channelId, name: "general", type: f.guildId ? 0 : 1 },
    ...(f.guildId ? { guild_id: f.guildId, member: { user, nick: null } } : { user }),
    data: {
      id: "1",
      name: f.command ?? "ask",
      type: 1,
      options: [
        ...(f.text ? [{ name: "message", type: 3, value: f.text }] : []),
        ...(f.attachment ? [{ name: "attachment", type: 11, value: f.attachment.id }] : []),
      ],
      ...(f.attachment ? { resolved: { attachments: { [f.attachment.id]: f.attachment } } } : {}),
    },
  };
}

let wamids = 1;

/** A WhatsApp Cloud API notification with one message from `from` (text unless `type` says). */
export function whatsappNotification(f: {
  phoneNumberId: string;
  from: string;
  text?: string;
  type?: string;
  id?: string;
  /** The media object of an image, audio or document message (default `{ id: "media-1" }`). */
  media?: Record<string, unknown>;
}) {
  const id = f.id ?? `wamid.HBgL${wamids++}`;
  const message =
    (f.type ?? "text") === "text"
      ? {
          from: f.from,
          id,
          timestamp: String(Math.floor(Date.now() / 1000)),
          type: "text",
          text: { body: f.text ?? "" },
        }
      : {
          from: f.from,
          id,
          timestamp: String(Math.floor(Date.now() / 1000)),
          type: f.type,
          [f.type as string]: f.media ?? { id: "media-1" },
        };
  return {
    object: "whatsapp_business_account",
    entry: [
      {
        id: "WABA-1",
        changes: [
          {
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: { display_phone_number: "15550001111", phone_number_id: f.phoneNumberId },
              contacts: [{ profile: { name: "Kerry" }, wa_id: f.from }],
              messages: [message],
            },
          },
        ],
      },
    ],
  };
}
