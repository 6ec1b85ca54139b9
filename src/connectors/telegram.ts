/**
 * Telegram, through the Bot API's webhook (SPEC §18; core.telegram.org/bots/api): the request
 * carries the secret token given to `setWebhook` in `X-Telegram-Bot-Api-Secret-Token`; an
 * `Update`'s `message` or `channel_post` (text, or a caption) is a message; private chats are
 * direct, groups and supergroups groups, channels channels; a forum topic's
 * `message_thread_id` is the thread. A photo (its largest size), voice note, audio file or
 * document is an attachment fetched by the run through `getFile` (SPEC §22). Replies go through
 * `sendMessage` in the same chat and topic, 4096 characters a message; a 429's
 * `parameters.retry_after` is honoured.
 */
import { equalsSecret } from "../auth/signature";
import type { TelegramConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";
import { brief, callApi, classifyStatus, isFailure, postParts } from "./platform-api";
import { splitText } from "./split";
import type { Account, PlatformConnector, PlatformMessage, PreviewResult, Received, Secrets } from "./types";

export const SECRET_TOKEN_HEADER = "x-telegram-bot-api-secret-token";
const MAX_CHARS = 4096;

interface User {
  id: number;
  is_bot?: boolean;
  first_name?: string;
  last_name?: string;
  username?: string;
}

interface Chat {
  id: number;
  type: "private" | "group" | "supergroup" | "channel";
  title?: string;
  username?: string;
  first_name?: string;
  last_name?: string;
}

interface Message {
  message_id: number;
  message_thread_id?: number;
  is_topic_message?: boolean;
  from?: User;
  sender_chat?: Chat;
  chat: Chat;
  date?: number;
  text?: string;
  caption?: string;
  reply_to_message?: Message;
  photo?: Array<{ file_id: string; file_size?: number; width?: number; height?: number }>;
  voice?: TelegramFile;
  audio?: TelegramFile;
  document?: TelegramFile;
}

interface TelegramFile {
  file_id: string;
  file_name?: string;
  mime_type?: string;
  file_size?: number;
}

type Attachment = NonNullable<InboundMessage["attachments"]>[number];

/** The files of a message, as attachments its run fetches by file id. */
function attachmentsOf(m: Message): Attachment[] {
  const out: Attachment[] = [];
  const size = (n: number | undefined) => (n !== undefined ? { bytes: n } : {});
  // Telegram sends each photo in several sizes, smallest first.
  const photo = m.photo?.at(-1);
  if (photo)
    out.push({
      type: "image",
      ref: photo.file_id,
      mimeType: "image/jpeg",
      name: "photo.jpg",
      ...size(photo.file_size),
    });
  if (m.voice)
    out.push({
      type: "voice",
      ref: m.voice.file_id,
      mimeType: m.voice.mime_type ?? "audio/ogg",
      name: "voice.ogg",
      ...size(m.voice.file_size),
    });
  for (const [type, f] of [
    ["audio", m.audio],
    ["document", m.document],
  ] as const) {
    if (!f) continue;
    out.push({
      type,
      ref: f.file_id,
      mimeType: f.mime_type ?? (type === "audio" ? "audio/mpeg" : "application/octet-stream"),
      ...(f.file_name ? { name: f.file_name } : {}),
      ...size(f.file_size),
    });
  }
  return out;
}

interface Update {
  update_id: number;
  message?: Message;
  channel_post?: Message;
}

type Bot = Account<TelegramConfig>;

function isUpdate(body: unknown): body is Update {
  return (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { update_id?: unknown }).update_id === "number"
  );
}

function nameOf(u: {
  first_name?: string;
  last_name?: string;
  username?: string;
  title?: string;
}): string | undefined {
  const full = [u.first_name, u.last_name].filter(Boolean).join(" ");
  return u.title ?? (full || u.username);
}

/** The message mentions the bot (`@username`) or replies to one of the bot's messages. */
function mentions(m: Message, bot: Bot): boolean {
  const username = bot.botUsername?.toLowerCase();
  if (!username) return false;
  const text = (m.text ?? m.caption ?? "").toLowerCase();
  if (new RegExp(`(^|[^a-z0-9_])@${username}(?![a-z0-9_])`).test(text)) return true;
  return m.reply_to_message?.from?.username?.toLowerCase() === username;
}

/** The SPEC §4 message of a Telegram message, or undefined for what is not one to run. */
export function normalizeTelegram(updateId: number, m: Message, bot: Bot): PlatformMessage | undefined {
  const text = m.text ?? m.caption ?? "";
  const attachments = attachmentsOf(m);
  if (text.trim() === "" && attachments.length === 0) return undefined;
  // Bots (this one included) are not people to answer.
  if (m.from?.is_bot) return undefined;
  const chat = m.chat;
  const chatType = chat.type === "private" ? "direct" : chat.type === "channel" ? "channel" : "group";
  const from = String(m.from?.id ?? m.sender_chat?.id ?? chat.id);
  const inbound: InboundMessage = {
    messageId: String(updateId),
    chatType,
    from,
    to: String(chat.id),
    text,
    ...(attachments.length > 0 ? { attachments } : {}),
  };
  if (chatType !== "direct") {
    inbound.groupId = String(chat.id);
    const subject = nameOf(chat);
    if (subject) inbound.groupSubject = subject;
  }
  if (m.is_topic_message && m.message_thread_id !== undefined) {
    inbound.threadId = String(m.message_thread_id);
    inbound.topic = true;
  }
  const sender = m.from ? nameOf(m.from) : undefined;
  if (sender) inbound.senderName = sender;
  if (m.date !== undefined) inbound.timestamp = m.date * 1000;
  return { inbound, mentioned: mentions(m, bot), replyTo: String(m.message_id) };
}

function api(bot: Bot, secrets: Secrets, method: string): string {
  return `${bot.apiBaseUrl.replace(/\/+$/, "")}/bot${secrets[bot.botTokenEnv] ?? ""}/${method}`;
}

async function call(bot: Bot, secrets: Secrets, method: string, body: unknown) {
  return callApi(api(bot, secrets, method), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

interface ApiResult {
  ok?: boolean;
  description?: string;
  parameters?: { retry_after?: number };
  result?: { username?: string; id?: number; file_path?: string; message_id?: number };
}

/** A preview's call answered: its message id, or the platform's reason. */
function previewAnswer(
  a: Awaited<ReturnType<typeof call>>,
  method: string,
  messageId: string | undefined,
): PreviewResult {
  if (isFailure(a)) return { ok: false, error: `Telegram ${method}: ${a.error}` };
  const r = (a.json ?? {}) as ApiResult;
  // An edit to the text it shows already changes nothing: still the preview.
  if (messageId && r.description?.includes("message is not modified")) return { ok: true, messageId };
  const id = messageId ?? (r.result?.message_id !== undefined ? String(r.result.message_id) : undefined);
  if (a.status >= 300 || !r.ok || !id)
    return { ok: false, error: `Telegram ${method} answered ${a.status}: ${brief(r.description ?? a.text)}` };
  return { ok: true, messageId: id };
}

export const telegram: PlatformConnector<TelegramConfig> = {
  type: "telegram",
  maxChars: MAX_CHARS,

  secretNames: (bot) => [
    { env: bot.botTokenEnv, path: "botTokenEnv", required: true },
    { env: bot.webhookSecretEnv, path: "webhookSecretEnv", required: true },
  ],

  async verify(req, bot, secrets) {
    const given = req.headers.get(SECRET_TOKEN_HEADER);
    if (!given) return { ok: false, reason: `missing ${SECRET_TOKEN_HEADER} header` };
    return equalsSecret(given, secrets[bot.webhookSecretEnv] ?? "")
      ? { ok: true }
      : { ok: false, reason: `${SECRET_TOKEN_HEADER} does not match the webhook secret` };
  },

  receive(body, bot): Received {
    if (!isUpdate(body)) throw new Error("not a Telegram Update: `update_id` (a number) is required");
    const m = body.message ?? body.channel_post;
    const message =
      m && typeof m.chat?.id === "number" ? normalizeTelegram(body.update_id, m, bot) : undefined;
    // Edits, reactions, member changes and the rest are acknowledged and ignored.
    return { answer: { status: 200, body: {} }, messages: message ? [message] : [] };
  },

  async send(out, bot, secrets, onPart) {
    const parts = splitText(out.text, MAX_CHARS);
    return postParts(
      parts,
      out.partsSent,
      async (text, i) => {
        const body: Record<string, unknown> = { chat_id: out.to, text };
        if (out.threadId) body.message_thread_id = Number(out.threadId) || out.threadId;
        if (i === 0 && out.replyToMessageId && /^\d+$/.test(out.replyToMessageId)) {
          body.reply_parameters = {
            message_id: Number(out.replyToMessageId),
            allow_sending_without_reply: true,
          };
        }
        const a = await call(bot, secrets, "sendMessage", body);
        if (isFailure(a)) return a;
        const r = (a.json ?? {}) as ApiResult;
        const retryAfter = r.parameters?.retry_after;
        return classifyStatus(
          a,
          "Telegram sendMessage",
          brief(r.description ?? a.text),
          retryAfter !== undefined ? retryAfter * 1000 : undefined,
        );
      },
      onPart,
    );
  },

  // A preview is a message of its own, edited as the reply grows (SPEC §22).
  preview: {
    async show(target, text, messageId, bot, secrets) {
      if (messageId) {
        const a = await call(bot, secrets, "editMessageText", {
          chat_id: target.to,
          message_id: Number(messageId),
          text,
        });
        return previewAnswer(a, "editMessageText", messageId);
      }
      const body: Record<string, unknown> = { chat_id: target.to, text };
      if (target.threadId) body.message_thread_id = Number(target.threadId) || target.threadId;
      if (target.replyToMessageId && /^\d+$/.test(target.replyToMessageId))
        body.reply_parameters = {
          message_id: Number(target.replyToMessageId),
          allow_sending_without_reply: true,
        };
      return previewAnswer(await call(bot, secrets, "sendMessage", body), "sendMessage", undefined);
    },
    async remove(target, messageId, bot, secrets) {
      const a = await call(bot, secrets, "deleteMessage", {
        chat_id: target.to,
        message_id: Number(messageId),
      });
      return !isFailure(a) && a.status < 300;
    },
  },

  async fileSource(ref, bot, secrets) {
    // getFile answers the file's path, valid for an hour, under the file download URL.
    const a = await call(bot, secrets, "getFile", { file_id: ref });
    if (isFailure(a)) return { ok: false, error: `Telegram getFile: ${a.error}`, permanent: false };
    const r = (a.json ?? {}) as ApiResult;
    const path = r.result?.file_path;
    if (!r.ok || !path) {
      return {
        ok: false,
        error: `Telegram getFile answered ${a.status}: ${brief(r.description ?? a.text)}`,
        permanent: a.status >= 400 && a.status < 500 && a.status !== 429,
      };
    }
    const base = bot.apiBaseUrl.replace(/\/+$/, "");
    return { ok: true, url: `${base}/file/bot${secrets[bot.botTokenEnv] ?? ""}/${path}` };
  },

  async activity(to, threadId, bot, secrets) {
    const body: Record<string, unknown> = { chat_id: to, action: "typing" };
    if (threadId) body.message_thread_id = Number(threadId) || threadId;
    await call(bot, secrets, "sendChatAction", body);
  },

  async setup(webhookUrl, bot, secrets) {
    const a = await call(bot, secrets, "setWebhook", {
      url: webhookUrl,
      secret_token: secrets[bot.webhookSecretEnv],
      allowed_updates: ["message", "channel_post"],
    });
    if (isFailure(a)) return { ok: false, detail: `setWebhook: ${a.error}` };
    const r = (a.json ?? {}) as ApiResult;
    return r.ok
      ? { ok: true, detail: `setWebhook: Telegram now posts updates to ${webhookUrl}` }
      : { ok: false, detail: `setWebhook answered ${a.status}: ${brief(r.description ?? a.text)}` };
  },

  async check(bot, secrets) {
    const a = await call(bot, secrets, "getMe", {});
    if (isFailure(a)) return { ok: false, detail: `getMe: ${a.error}` };
    const r = (a.json ?? {}) as ApiResult;
    if (!r.ok || !r.result)
      return { ok: false, detail: `getMe answered ${a.status}: ${brief(r.description ?? a.text)}` };
    const name = r.result.username ? `@${r.result.username}` : String(r.result.id);
    const mismatch =
      bot.botUsername &&
      r.result.username &&
      r.result.username.toLowerCase() !== bot.botUsername.toLowerCase()
        ? ` (config says botUsername "${bot.botUsername}")`
        : "";
    return { ok: !mismatch, detail: `getMe: the token is bot ${name}${mismatch}` };
  },
};
