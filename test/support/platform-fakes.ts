/**
 * Fakes of the chat platforms' APIs, written from their public documentation: Telegram's Bot API
 * (`/bot<token>/sendMessage`, `sendChatAction`, `setWebhook`, `getMe`, `getFile` and the file
 * download at `/file/bot<token>/<file_path>`), Slack's Web API
 * (`chat.postMessage`, `auth.test`), Discord's HTTP API (interaction webhooks, channel messages,
 * DM channels, command registration, `users/@me`) and WhatsApp's Cloud API
 * (`/<phone number id>/messages`).
 * Each answers as the platform does, success and error shapes alike, checks the credentials it
 * was given and the platform's length limits, and records every call. A test scripts failures:
 * the next N calls answer a status (a 429 with the platform's own wait, a 500), or every call
 * does until the fake is told to recover.
 *
 * A fake is a `(Request) => Promise<Response>` handler: workerd tests put it behind a fetch spy,
 * end-to-end tests behind a loopback HTTP server (test/e2e/support/platform-server.ts).
 */

export interface PlatformCall {
  method: string;
  /** The path after the API base, e.g. `/bot123:abc/sendMessage`. */
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  /** The status the fake answered. */
  status: number;
  /** When the fake received it (its own clock). */
  at: number;
}

export type Failure = { status: number; retryAfterSeconds?: number };

type Handler = (
  call: PlatformCall,
  url: URL,
) => { status: number; body: unknown; headers?: Record<string, string>; raw?: Uint8Array };

/** A message as the chat shows it now: edits change its text, a delete takes it away. */
export interface ChatMessage {
  id: string;
  chat: string;
  text: string;
  deleted: boolean;
  /** How many times it was edited. */
  edits: number;
}

export class FakePlatform {
  readonly calls: PlatformCall[] = [];
  /** What the chats show, by message id (posted, edited and deleted through the fake). */
  readonly messages = new Map<string, ChatMessage>();
  private script: Failure[] = [];
  private down: Failure | undefined;
  private failing: Array<{ when: (c: PlatformCall) => boolean; status: number; times: number }> = [];

  readonly name: string;
  private readonly route: Handler;
  private readonly failureBody: (f: Failure) => { body: unknown; headers?: Record<string, string> };

  // Plain fields, not parameter properties: Node runs this file with type stripping only.
  constructor(
    name: string,
    route: Handler,
    failureBody: (f: Failure) => { body: unknown; headers?: Record<string, string> },
  ) {
    this.name = name;
    this.route = route;
    this.failureBody = failureBody;
  }

  /** The next `n` message posts answer `status` (429s carry `retryAfterSeconds`). */
  fail(status: number, n: number, retryAfterSeconds?: number): void {
    for (let i = 0; i < n; i++)
      this.script.push({ status, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) });
  }

  /** The next `times` calls `when` matches answer `status` (an edit that fails, say). */
  failWhen(when: (c: PlatformCall) => boolean, status: number, times = 1): void {
    this.failing.push({ when, status, times });
  }

  /** The texts a chat shows now, oldest first. */
  shown(chat?: string): string[] {
    return [...this.messages.values()]
      .filter((m) => !m.deleted && (chat === undefined || m.chat === chat))
      .map((m) => m.text);
  }

  /** Records a posted message. */
  record(id: string, chat: string, text: string): void {
    this.messages.set(id, { id, chat, text, deleted: false, edits: 0 });
  }

  /** Every message post answers `status` until `recover()`. */
  breakDown(status: number): void {
    this.down = { status };
  }

  recover(): void {
    this.down = undefined;
  }

  /** Calls that posted a message (not typing, setup or checks), answered 2xx. */
  posted(): PlatformCall[] {
    return this.calls.filter((c) => c.status < 300 && this.isPost(c));
  }

  isPost(c: PlatformCall): boolean {
    return (
      /sendMessage$|chat\.postMessage$|\/messages(\/@original)?$|\/webhooks\/\d+\/[^/]+$/.test(c.path) &&
      c.method !== "GET"
    );
  }

  async handle(req: Request, base: string): Promise<Response> {
    const url = new URL(req.url);
    const path = url.pathname.slice(new URL(base).pathname.replace(/\/+$/, "").length);
    const text = await req.text();
    let body: Record<string, unknown> = {};
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      body = { raw: text };
    }
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      headers[k] = v;
    });
    const call: PlatformCall = { method: req.method, path, headers, body, status: 0, at: Date.now() };
    this.calls.push(call);
    const scripted = this.failing.find((f) => f.times > 0 && f.when(call));
    if (scripted) scripted.times--;
    const failure = scripted
      ? { status: scripted.status }
      : this.isPost(call)
        ? (this.script.shift() ?? this.down)
        : undefined;
    let answer: { status: number; body: unknown; headers?: Record<string, string>; raw?: Uint8Array };
    if (failure) {
      const f = this.failureBody(failure);
      answer = { status: failure.status, ...f };
    } else {
      answer = this.route(call, url);
    }
    call.status = answer.status;
    if (answer.raw)
      return new Response(answer.raw as Uint8Array<ArrayBuffer>, {
        status: answer.status,
        headers: answer.headers ?? {},
      });
    return new Response(JSON.stringify(answer.body), {
      status: answer.status,
      headers: { "content-type": "application/json", ...answer.headers },
    });
  }
}

let ids = 1000;

/** A file a fake holds (Telegram: `getFile` answers its path; Slack: its private URL), and its bytes. */
export interface TelegramFakeFile {
  data: Uint8Array;
  mimeType: string;
}

/** Telegram's Bot API (core.telegram.org/bots/api): answers `{ok, result}` or `{ok: false, error_code, description}`. */
export function fakeTelegram(
  token: string,
  bot = { id: 7000001, username: "helper_bot" },
): FakePlatform & { files: Map<string, TelegramFakeFile> } {
  const files = new Map<string, TelegramFakeFile>();
  const error = (code: number, description: string, extra: Record<string, unknown> = {}) => ({
    status: code,
    body: { ok: false, error_code: code, description, ...extra },
  });
  const fake: FakePlatform = new FakePlatform(
    "telegram",
    (call): ReturnType<Handler> => {
      // The file download (core.telegram.org/bots/api#getfile): /file/bot<token>/<file_path>.
      const download = /^\/file\/bot([^/]+)\/files\/(.+)$/.exec(call.path);
      if (download) {
        if (download[1] !== token) return error(401, "Unauthorized");
        const file = files.get(decodeURIComponent(download[2] ?? ""));
        return file
          ? { status: 200, body: null, raw: file.data, headers: { "content-type": file.mimeType } }
          : error(404, "Not Found");
      }
      const m = /^\/bot([^/]+)\/(\w+)$/.exec(call.path);
      if (!m) return error(404, "Not Found");
      if (m[1] !== token) return error(401, "Unauthorized");
      const b = call.body;
      switch (m[2]) {
        case "sendMessage": {
          const text = String(b.text ?? "");
          if (!b.chat_id) return error(400, "Bad Request: chat_id is empty");
          if (text.length === 0) return error(400, "Bad Request: message text is empty");
          if (text.length > 4096) return error(400, "Bad Request: message is too long");
          if (String(b.chat_id) === "404404") return error(400, "Bad Request: chat not found");
          const id = ids++;
          fake.record(String(id), String(b.chat_id), text);
          return {
            status: 200,
            body: {
              ok: true,
              result: {
                message_id: id,
                chat: { id: Number(b.chat_id) },
                date: Math.floor(Date.now() / 1000),
                text,
              },
            },
          };
        }
        // core.telegram.org/bots/api#editmessagetext and #deletemessage
        case "editMessageText": {
          const shown = fake.messages.get(String(b.message_id));
          const text = String(b.text ?? "");
          if (!shown || shown.deleted || shown.chat !== String(b.chat_id))
            return error(400, "Bad Request: message to edit not found");
          if (text.length === 0) return error(400, "Bad Request: message text is empty");
          if (text.length > 4096) return error(400, "Bad Request: MESSAGE_TOO_LONG");
          if (text === shown.text)
            return error(
              400,
              "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            );
          shown.text = text;
          shown.edits++;
          return {
            status: 200,
            body: {
              ok: true,
              result: { message_id: Number(shown.id), chat: { id: Number(shown.chat) }, text },
            },
          };
        }
        case "deleteMessage": {
          const shown = fake.messages.get(String(b.message_id));
          if (!shown || shown.deleted || shown.chat !== String(b.chat_id))
            return error(400, "Bad Request: message to delete not found");
          shown.deleted = true;
          return { status: 200, body: { ok: true, result: true } };
        }
        case "sendChatAction":
          return { status: 200, body: { ok: true, result: true } };
        case "getFile": {
          const id = String(b.file_id ?? "");
          const file = files.get(id);
          if (!file) return error(400, "Bad Request: invalid file_id");
          return {
            status: 200,
            body: {
              ok: true,
              result: {
                file_id: id,
                file_unique_id: `u${id}`,
                file_size: file.data.byteLength,
                file_path: `files/${id}`,
              },
            },
          };
        }
        case "setWebhook":
          return b.url
            ? { status: 200, body: { ok: true, result: true, description: "Webhook was set" } }
            : error(400, "Bad Request: bad webhook");
        case "getMe":
          return {
            status: 200,
            body: {
              ok: true,
              result: { id: bot.id, is_bot: true, first_name: "Helper", username: bot.username },
            },
          };
        default:
          return error(404, "Not Found: method not found");
      }
    },
    (f) =>
      f.status === 429
        ? {
            body: {
              ok: false,
              error_code: 429,
              description: `Too Many Requests: retry after ${f.retryAfterSeconds ?? 1}`,
              parameters: { retry_after: f.retryAfterSeconds ?? 1 },
            },
          }
        : { body: { ok: false, error_code: f.status, description: "Internal Server Error" } },
  );
  return Object.assign(fake, { files });
}

/** Slack's Web API (api.slack.com/web): HTTP 200 with `{ok: false, error}` for most errors; 429 with Retry-After. */
export function fakeSlack(
  token: string,
  bot = { userId: "U0BOT", user: "helper", team: "Acme" },
): FakePlatform & { files: Map<string, TelegramFakeFile> } {
  const files = new Map<string, TelegramFakeFile>();
  const fake: FakePlatform = new FakePlatform(
    "slack",
    (call): ReturnType<Handler> => {
      // A file's url_private_download (api.slack.com/types/file): the bot token or a 403 page.
      const file = /^\/files-pri\/(.+)$/.exec(call.path);
      if (file) {
        const found = files.get(decodeURIComponent(file[1] ?? ""));
        if (call.headers.authorization !== `Bearer ${token}`) return { status: 403, body: "forbidden" };
        return found
          ? { status: 200, body: null, raw: found.data, headers: { "content-type": found.mimeType } }
          : { status: 404, body: "not found" };
      }
      if (call.headers.authorization !== `Bearer ${token}`)
        return { status: 200, body: { ok: false, error: "invalid_auth" } };
      switch (call.path) {
        case "/chat.postMessage": {
          const text = String(call.body.text ?? "");
          if (!call.body.channel) return { status: 200, body: { ok: false, error: "channel_not_found" } };
          if (String(call.body.channel) === "CGONE")
            return { status: 200, body: { ok: false, error: "channel_not_found" } };
          if (String(call.body.channel) === "COUT")
            return { status: 200, body: { ok: false, error: "not_in_channel" } };
          if (!text) return { status: 200, body: { ok: false, error: "no_text" } };
          if (text.length > 40_000) return { status: 200, body: { ok: false, error: "msg_too_long" } };
          const ts = `${Math.floor(Date.now() / 1000)}.${String(ids++).padStart(6, "0")}`;
          fake.record(ts, String(call.body.channel), text);
          return {
            status: 200,
            body: {
              ok: true,
              channel: call.body.channel,
              ts,
              message: { text, ts, thread_ts: call.body.thread_ts },
            },
          };
        }
        // api.slack.com/methods/chat.update and chat.delete
        case "/chat.update":
        case "/chat.delete": {
          const shown = fake.messages.get(String(call.body.ts ?? ""));
          if (!shown || shown.deleted || shown.chat !== String(call.body.channel))
            return { status: 200, body: { ok: false, error: "message_not_found" } };
          if (call.path === "/chat.delete") {
            shown.deleted = true;
            return { status: 200, body: { ok: true, channel: shown.chat, ts: shown.id } };
          }
          const text = String(call.body.text ?? "");
          if (!text) return { status: 200, body: { ok: false, error: "no_text" } };
          shown.text = text;
          shown.edits++;
          return { status: 200, body: { ok: true, channel: shown.chat, ts: shown.id, text } };
        }
        case "/auth.test":
          return {
            status: 200,
            body: {
              ok: true,
              url: "https://acme.slack.com/",
              team: bot.team,
              user: bot.user,
              team_id: "T1",
              user_id: bot.userId,
            },
          };
        default:
          return { status: 404, body: { ok: false, error: "unknown_method" } };
      }
    },
    (f) =>
      f.status === 429
        ? {
            body: { ok: false, error: "ratelimited" },
            headers: { "retry-after": String(f.retryAfterSeconds ?? 1) },
          }
        : { body: { ok: false, error: "internal_error" } },
  );
  return Object.assign(fake, { files });
}

/** A Discord user the fake knows: their DM channel with the bot, and whether they take DMs. */
export interface DiscordUser {
  dmChannelId: string;
  dmsClosed: boolean;
}

/**
 * Discord's HTTP API (discord.com/developers/docs): interaction webhooks by token (a token can be
 * expired with `expire(token)`: 401 Invalid Webhook Token), channel messages with `Bot <token>`,
 * and DM channels. Users are known once `addUser` names them: `POST /users/@me/channels
 * {recipient_id}` answers a known user's DM channel (the same one every time, as Discord does)
 * and 400 Invalid Recipient(s) for anyone else; a user's id is no channel (posting to it is 404
 * Unknown Channel), and a user whose DMs are closed makes posts to their DM channel 403 Cannot
 * send messages to this user. Any other channel id is a guild channel the bot may post in.
 */
export function fakeDiscord(
  applicationId: string,
  botToken: string,
): FakePlatform & {
  expire(token: string): void;
  commands: unknown[];
  addUser(id: string, opts?: { dmChannelId?: string; dmsClosed?: boolean }): DiscordUser;
  files: Map<string, TelegramFakeFile>;
} {
  const files = new Map<string, TelegramFakeFile>();
  const expired = new Set<string>();
  const commands: unknown[] = [];
  const users = new Map<string, DiscordUser>();
  const unauthorized = { status: 401, body: { message: "401: Unauthorized", code: 0 } };
  const message = (content: string, channelId = "1") => ({
    id: String(ids++),
    channel_id: channelId,
    content,
    type: 0,
  });
  const tooLong = {
    status: 400,
    body: {
      code: 50035,
      message: "Invalid Form Body",
      errors: {
        content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }] },
      },
    },
  };
  const fake: FakePlatform = new FakePlatform(
    "discord",
    (call): ReturnType<Handler> => {
      // An attachment on the CDN (here under the API's host): its signed URL, no token needed.
      const attachment = /^\/attachments\/(.+)$/.exec(call.path);
      if (attachment) {
        const file = files.get(decodeURIComponent(attachment[1] ?? ""));
        return file
          ? { status: 200, body: null, raw: file.data, headers: { "content-type": file.mimeType } }
          : { status: 404, body: { message: "404: Not Found", code: 0 } };
      }
      const content = String(call.body.content ?? "");
      const hook = /^\/webhooks\/(\d+)\/([^/]+)(\/messages\/@original)?$/.exec(call.path);
      if (hook) {
        if (hook[1] !== applicationId || !hook[2] || expired.has(hook[2]))
          return { status: 401, body: { message: "Invalid Webhook Token", code: 50027 } };
        // The deferred response is a message of the interaction: edited by PATCH, gone by DELETE.
        const original = `${hook[2]}/@original`;
        if (hook[3] && call.method === "DELETE") {
          const shown = fake.messages.get(original);
          if (!shown || shown.deleted)
            return { status: 404, body: { message: "Unknown Message", code: 10008 } };
          shown.deleted = true;
          return { status: 204, body: null };
        }
        if (content.length > 2000) return tooLong;
        const posted = message(content);
        if (hook[3]) {
          const shown = fake.messages.get(original);
          if (shown && !shown.deleted) {
            shown.text = content;
            shown.edits++;
          } else fake.record(original, hook[2], content);
        } else fake.record(posted.id, hook[2], content);
        return { status: 200, body: posted };
      }
      const channel = /^\/channels\/(\d+)\/messages$/.exec(call.path);
      const authorized = call.headers.authorization === `Bot ${botToken}`;
      if (channel) {
        if (!authorized) return unauthorized;
        const id = channel[1] as string;
        if (users.has(id)) return { status: 404, body: { message: "Unknown Channel", code: 10003 } };
        const recipient = [...users.values()].find((u) => u.dmChannelId === id);
        if (recipient?.dmsClosed)
          return { status: 403, body: { message: "Cannot send messages to this user", code: 50007 } };
        if (content.length > 2000) return tooLong;
        const posted = message(content, id);
        fake.record(posted.id, id, content);
        return { status: 200, body: posted };
      }
      // Create DM (discord.com/developers/docs/resources/user#create-dm): the DM channel object.
      if (call.path === "/users/@me/channels" && call.method === "POST") {
        if (!authorized) return unauthorized;
        const recipient = call.body.recipient_id;
        if (typeof recipient !== "string" || !/^\d+$/.test(recipient)) {
          return {
            status: 400,
            body: {
              code: 50035,
              message: "Invalid Form Body",
              errors: {
                recipient_id: {
                  _errors: [{ code: "NUMBER_TYPE_COERCE", message: "Value is not snowflake." }],
                },
              },
            },
          };
        }
        const user = users.get(recipient);
        if (!user) return { status: 400, body: { message: "Invalid Recipient(s)", code: 50033 } };
        return {
          status: 200,
          body: {
            id: user.dmChannelId,
            type: 1,
            last_message_id: null,
            flags: 0,
            recipients: [{ id: recipient, username: `user${recipient.slice(-4)}`, global_name: null }],
          },
        };
      }
      if (call.path === `/applications/${applicationId}/commands` && call.method === "PUT") {
        if (!authorized) return unauthorized;
        commands.splice(0, commands.length, ...((call.body as unknown as unknown[]) ?? []));
        return { status: 200, body: call.body };
      }
      if (call.path === "/users/@me") {
        return authorized
          ? { status: 200, body: { id: "1100", username: "helper", bot: true } }
          : unauthorized;
      }
      return { status: 404, body: { message: "404: Not Found", code: 0 } };
    },
    (f) =>
      f.status === 429
        ? {
            body: {
              message: "You are being rate limited.",
              retry_after: f.retryAfterSeconds ?? 1,
              global: false,
            },
            headers: { "retry-after": String(f.retryAfterSeconds ?? 1) },
          }
        : { body: { message: "500: Internal Server Error", code: 0 } },
  );
  const addUser = (id: string, opts: { dmChannelId?: string; dmsClosed?: boolean } = {}) => {
    const dmChannelId = opts.dmChannelId ?? `18${String(ids++).padStart(17, "0")}`;
    const user = { dmChannelId, dmsClosed: opts.dmsClosed ?? false };
    users.set(id, user);
    return user;
  };
  return Object.assign(fake, { expire: (token: string) => expired.add(token), commands, addUser, files });
}

/** WhatsApp's Cloud API (Graph API): `/<phone number id>/messages` with a Bearer token; Graph errors. */
export function fakeWhatsApp(
  phoneNumberId: string,
  accessToken: string,
): FakePlatform & { media: Map<string, TelegramFakeFile> } {
  const media = new Map<string, TelegramFakeFile>();
  const graphError = (status: number, code: number, message: string) => ({
    status,
    body: { error: { message, type: "OAuthException", code, fbtrace_id: "AbCdEf" } },
  });
  const fake: FakePlatform = new FakePlatform(
    "whatsapp",
    (call, url): ReturnType<Handler> => {
      if (call.headers.authorization !== `Bearer ${accessToken}`)
        return graphError(401, 190, "Invalid OAuth access token.");
      // Media (developers.facebook.com/docs/whatsapp/cloud-api/reference/media): GET /<media id>
      // answers a short-lived URL, downloaded with the same token.
      const download = /^\/media-download\/(.+)$/.exec(call.path);
      if (download) {
        const file = media.get(decodeURIComponent(download[1] ?? ""));
        return file
          ? { status: 200, body: null, raw: file.data, headers: { "content-type": file.mimeType } }
          : graphError(404, 100, "Media not found");
      }
      const mediaId = /^\/([^/]+)$/.exec(call.path)?.[1];
      if (call.method === "GET" && mediaId && mediaId !== phoneNumberId) {
        const file = media.get(decodeURIComponent(mediaId));
        if (!file) return graphError(400, 100, "(#100) Invalid parameter: media id");
        const base = url.href.slice(0, url.href.length - url.search.length - call.path.length);
        return {
          status: 200,
          body: {
            messaging_product: "whatsapp",
            url: `${base}/media-download/${mediaId}`,
            mime_type: file.mimeType,
            file_size: file.data.byteLength,
            id: mediaId,
          },
        };
      }
      if (call.path === `/${phoneNumberId}/messages` && call.method === "POST") {
        const body = String((call.body.text as { body?: string } | undefined)?.body ?? "");
        if (call.body.messaging_product !== "whatsapp")
          return graphError(400, 100, "(#100) The parameter messaging_product is required.");
        if (!body) return graphError(400, 100, "(#100) Param text['body'] is required.");
        if (body.length > 4096)
          return graphError(400, 100, "(#100) Param text['body'] must be at most 4096 characters long.");
        const id = `wamid.${ids++}`;
        fake.record(id, String(call.body.to), body);
        return {
          status: 200,
          body: {
            messaging_product: "whatsapp",
            contacts: [{ input: call.body.to, wa_id: call.body.to }],
            messages: [{ id }],
          },
        };
      }
      if (call.path === `/${phoneNumberId}` && call.method === "GET") {
        return {
          status: 200,
          body: { display_phone_number: "+1 555-000-1111", verified_name: "Helper", id: phoneNumberId },
        };
      }
      return graphError(404, 803, "Unknown path");
    },
    (f) =>
      f.status === 429
        ? {
            body: { error: { message: "(#130429) Rate limit hit", type: "OAuthException", code: 130429 } },
            headers: { "retry-after": String(f.retryAfterSeconds ?? 1) },
          }
        : {
            body: {
              error: {
                message: "An unexpected error has occurred. Please retry your request later.",
                type: "OAuthException",
                code: 2,
              },
            },
          },
  );
  return Object.assign(fake, { media });
}
