/**
 * WhatsApp, through the Cloud API's webhooks (SPEC §18; developers.facebook.com/docs/whatsapp/
 * cloud-api/webhooks): the subscription handshake is a GET answering `hub.challenge` when
 * `hub.verify_token` matches; a notification is signed `X-Hub-Signature-256: sha256=<hex
 * HMAC-SHA256(app secret, raw body)>`; `entry[].changes[].value.messages[]` of type `text` are
 * direct messages of their sender; `image`, `audio` (voice notes too) and `document` messages
 * carry their file as an attachment the run fetches (SPEC §22: `GET /<media id>` answers a URL,
 * downloaded with the same token), their caption as the text. Statuses are acknowledged and
 * ignored; any other message type (a sticker, a location, a video) gets a short notice of what
 * is understood. Replies go through `/<phoneNumberId>/messages`, 4096 characters a message.
 */
import { equalsSecret, hmacHex } from "../auth/signature";
import type { WhatsAppConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";
import { brief, callApi, classifyStatus, isFailure, postParts, retryAfterHeader } from "./platform-api";
import { splitText } from "./split";
import type { Account, DirectNotice, PlatformConnector, PlatformMessage, Received, Secrets } from "./types";

export const SIGNATURE = "x-hub-signature-256";
const MAX_CHARS = 4096;
export const ONLY_TEXT_NOTICE = "Sorry, only text, photos, voice notes and documents are understood here.";

/** Graph API error codes that mean "slow down" (throughput, rate and spam-rate limits). */
const RATE_LIMITED = new Set([4, 80007, 130429, 131048, 131056, 613]);

type Number_ = Account<WhatsAppConfig>;

interface WaMessage {
  from?: string;
  id?: string;
  timestamp?: string;
  type?: string;
  text?: { body?: string };
  image?: WaMedia;
  audio?: WaMedia & { voice?: boolean };
  document?: WaMedia & { filename?: string };
}

/** A media message's file (developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components). */
interface WaMedia {
  id?: string;
  mime_type?: string;
  caption?: string;
}

type Attachment = NonNullable<InboundMessage["attachments"]>[number];

/** A media message's file as an attachment fetched by its media id, and its caption. */
function mediaOf(m: WaMessage): { attachment: Attachment; caption: string } | undefined {
  const file =
    m.type === "image"
      ? m.image
      : m.type === "audio"
        ? m.audio
        : m.type === "document"
          ? m.document
          : undefined;
  if (!file?.id) return undefined;
  const voice = m.type === "audio" && m.audio?.voice === true;
  const attachment: Attachment = {
    type: voice ? "voice" : (m.type as string),
    ref: file.id,
    mimeType:
      file.mime_type ??
      (m.type === "image" ? "image/jpeg" : m.type === "audio" ? "audio/ogg" : "application/octet-stream"),
  };
  const name =
    m.type === "document"
      ? m.document?.filename
      : voice
        ? "voice.ogg"
        : m.type === "image"
          ? "photo.jpg"
          : undefined;
  if (name) attachment.name = name;
  return { attachment, caption: file.caption ?? "" };
}

interface WaValue {
  metadata?: { phone_number_id?: string; display_phone_number?: string };
  contacts?: Array<{ wa_id?: string; profile?: { name?: string } }>;
  messages?: WaMessage[];
}

interface Notification {
  object?: string;
  entry?: Array<{ changes?: Array<{ field?: string; value?: WaValue }> }>;
}

/** The SPEC §4 messages and the notices of one notification's change. */
export function normalizeWhatsApp(
  value: WaValue,
  number: Number_,
): { messages: PlatformMessage[]; notices: DirectNotice[] } {
  const messages: PlatformMessage[] = [];
  const notices: DirectNotice[] = [];
  // Another number of the same app: not this account's to answer.
  if (value.metadata?.phone_number_id && value.metadata.phone_number_id !== number.phoneNumberId)
    return { messages, notices };
  for (const m of value.messages ?? []) {
    if (!m.from || !m.id) continue;
    const media = mediaOf(m);
    if (m.type !== "text" && !media) {
      // Reactions and the like are not messages a person expects an answer to.
      if (m.type !== "reaction" && m.type !== "unsupported")
        notices.push({ to: m.from, text: ONLY_TEXT_NOTICE });
      continue;
    }
    const text = media ? media.caption : (m.text?.body ?? "");
    if (text.trim() === "" && !media) continue;
    const inbound: InboundMessage = { messageId: m.id, chatType: "direct", from: m.from, text };
    if (media) inbound.attachments = [media.attachment];
    if (value.metadata?.display_phone_number) inbound.to = value.metadata.display_phone_number;
    const name = value.contacts?.find((c) => c.wa_id === m.from)?.profile?.name;
    if (name) inbound.senderName = name;
    const seconds = Number(m.timestamp);
    if (Number.isFinite(seconds) && seconds > 0) inbound.timestamp = seconds * 1000;
    messages.push({ inbound, mentioned: false, replyTo: m.id });
  }
  return { messages, notices };
}

function headers(number: Number_, secrets: Secrets): Record<string, string> {
  return {
    "content-type": "application/json",
    authorization: `Bearer ${secrets[number.accessTokenEnv] ?? ""}`,
  };
}

/** What the Graph API says of a media id: its short-lived URL, MIME type and size. */
function mediaInfo(ref: string, number: Number_, secrets: Secrets, timeoutMs?: number) {
  return callApi(
    `${number.apiBaseUrl.replace(/\/+$/, "")}/${encodeURIComponent(ref)}`,
    { method: "GET", headers: headers(number, secrets) },
    timeoutMs,
  );
}

function endpoint(number: Number_, path: string): string {
  return `${number.apiBaseUrl.replace(/\/+$/, "")}/${number.phoneNumberId}${path}`;
}

interface GraphError {
  error?: { message?: string; code?: number; error_subcode?: number };
}

export const whatsapp: PlatformConnector<WhatsAppConfig> = {
  type: "whatsapp",
  maxChars: MAX_CHARS,

  secretNames: (number) => [
    { env: number.appSecretEnv, path: "appSecretEnv", required: true },
    { env: number.verifyTokenEnv, path: "verifyTokenEnv", required: true },
    { env: number.accessTokenEnv, path: "accessTokenEnv", required: true },
  ],

  handshake(url, number, secrets) {
    const q = url.searchParams;
    const token = q.get("hub.verify_token") ?? "";
    const expected = secrets[number.verifyTokenEnv] ?? "";
    if (q.get("hub.mode") === "subscribe" && expected && equalsSecret(token, expected)) {
      return { status: 200, body: q.get("hub.challenge") ?? "" };
    }
    return { status: 403, body: "the verify token does not match" };
  },

  async verify(req, number, secrets) {
    const given = req.headers.get(SIGNATURE);
    if (!given?.startsWith("sha256="))
      return { ok: false, reason: `missing ${SIGNATURE} header (sha256=<hex>)` };
    const expected = `sha256=${await hmacHex(secrets[number.appSecretEnv] ?? "", req.raw)}`;
    return equalsSecret(given.toLowerCase(), expected)
      ? { ok: true }
      : { ok: false, reason: `${SIGNATURE} does not match` };
  },

  receive(body, number): Received {
    if (typeof body !== "object" || body === null) throw new Error("not a WhatsApp webhook notification");
    const messages: PlatformMessage[] = [];
    const notices: DirectNotice[] = [];
    for (const entry of (body as Notification).entry ?? []) {
      for (const change of entry.changes ?? []) {
        if (change.field !== "messages" || !change.value) continue;
        const got = normalizeWhatsApp(change.value, number);
        messages.push(...got.messages);
        notices.push(...got.notices);
      }
    }
    return { answer: { status: 200 }, messages, notices };
  },

  async send(out, number, secrets, onPart) {
    return postParts(
      splitText(out.text, MAX_CHARS),
      out.partsSent,
      async (body, i) => {
        const a = await callApi(endpoint(number, "/messages"), {
          method: "POST",
          headers: headers(number, secrets),
          body: JSON.stringify({
            messaging_product: "whatsapp",
            recipient_type: "individual",
            to: out.to,
            type: "text",
            text: { body, preview_url: false },
            ...(i === 0 && out.replyToMessageId ? { context: { message_id: out.replyToMessageId } } : {}),
          }),
        });
        if (isFailure(a)) return a;
        const e = ((a.json ?? {}) as GraphError).error;
        const reason = brief(e?.message ?? a.text);
        if (a.status < 300) return undefined;
        if (e?.code !== undefined && RATE_LIMITED.has(e.code)) {
          const wait = retryAfterHeader(a.headers);
          return {
            ok: false,
            error: `WhatsApp messages answered ${a.status} (code ${e.code}): ${reason}`,
            ...(wait !== undefined ? { retryAfterMs: wait } : {}),
          };
        }
        return classifyStatus(
          a,
          "WhatsApp messages",
          `${e?.code !== undefined ? `(code ${e.code}) ` : ""}${reason}`,
          retryAfterHeader(a.headers),
        );
      },
      onPart,
    );
  },

  async fileSize(ref, number, secrets, timeoutMs) {
    const a = await mediaInfo(ref, number, secrets, timeoutMs);
    const size = isFailure(a) ? undefined : (a.json as { file_size?: unknown } | undefined)?.file_size;
    return typeof size === "number" && size >= 0 ? size : undefined;
  },

  async fileSource(ref, number, secrets) {
    // The media id answers a short-lived URL, downloaded with the same token.
    const a = await mediaInfo(ref, number, secrets);
    if (isFailure(a)) return { ok: false, error: `WhatsApp media: ${a.error}`, permanent: false };
    const r = (a.json ?? {}) as { url?: string } & GraphError;
    if (a.status >= 300 || !r.url)
      return {
        ok: false,
        error: `WhatsApp media answered ${a.status}: ${brief(r.error?.message ?? a.text)}`,
        permanent: a.status >= 400 && a.status < 500 && a.status !== 429,
      };
    return {
      ok: true,
      url: r.url,
      headers: { authorization: `Bearer ${secrets[number.accessTokenEnv] ?? ""}` },
    };
  },

  async setup(webhookUrl, number) {
    return {
      ok: true,
      detail: [
        "WhatsApp's callback is set in the Meta app dashboard (WhatsApp → Configuration → Webhook):",
        `  Callback URL: ${webhookUrl}`,
        `  Verify token: the value of the secret ${number.verifyTokenEnv}`,
        "  Webhook fields: subscribe to messages",
      ].join("\n"),
    };
  },

  async check(number, secrets) {
    const a = await callApi(endpoint(number, ""), { method: "GET", headers: headers(number, secrets) });
    if (isFailure(a)) return { ok: false, detail: `phone number: ${a.error}` };
    const r = (a.json ?? {}) as { display_phone_number?: string; verified_name?: string } & GraphError;
    return a.status < 300
      ? {
          ok: true,
          detail: `phone number ${r.display_phone_number ?? number.phoneNumberId} (${r.verified_name ?? "unnamed"})`,
        }
      : { ok: false, detail: `phone number answered ${a.status}: ${brief(r.error?.message ?? a.text)}` };
  },
};
