/**
 * Discord, through the Interactions endpoint (SPEC §18; discord.com/developers/docs/interactions):
 * a request is signed with the application's Ed25519 key over `X-Signature-Timestamp` + the raw
 * body (`X-Signature-Ed25519`, checked with WebCrypto); a PING is answered `{type: 1}`; the slash
 * command `/<command> message:<text>` is a message (in a guild a channel chat, in a DM a direct
 * one), answered at once with a deferred response (`{type: 5}`) so the run happens after the ack.
 * The reply edits that original response, further parts are follow-ups (2000 characters each);
 * once the interaction token's 15 minutes are over, it is posted to the channel with the bot
 * token.
 */
import { z } from "zod";
import type { DiscordConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";
import { brief, callApi, classifyStatus, isFailure, postParts, retryAfterHeader } from "./platform-api";
import { splitText } from "./split";
import type { Account, PlatformConnector, PlatformMessage, Received, Secrets } from "./types";

export const SIGNATURE = "x-signature-ed25519";
export const TIMESTAMP = "x-signature-timestamp";
const MAX_CHARS = 2000;
/** An interaction token lasts 15 minutes; past 14, the bot token posts instead. */
export const TOKEN_LIFETIME_MS = 14 * 60_000;
const EPHEMERAL = 64;

type App = Account<DiscordConfig>;

interface DiscordUser {
  id: string;
  username?: string;
  global_name?: string | null;
  bot?: boolean;
}

interface Interaction {
  id: string;
  type: number;
  token?: string;
  application_id?: string;
  guild_id?: string;
  channel_id?: string;
  channel?: { id?: string; name?: string };
  member?: { user?: DiscordUser; nick?: string | null };
  user?: DiscordUser;
  data?: { name?: string; options?: Array<{ name?: string; value?: unknown }> };
}

/** What a reply needs that the route does not carry: the interaction's token, time and channel. */
/** An interaction's reply context, kept with the run's route and its outbox row. */
const ReplyContextSchema = z.looseObject({
  token: z.string(),
  at: z.number(),
  channelId: z.string().optional(),
});
type ReplyContext = z.infer<typeof ReplyContextSchema>;

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Ed25519 public keys, imported once per isolate (one per configured application). */
const keys = new Map<string, Promise<CryptoKey>>();

function publicKey(hex: string): Promise<CryptoKey> {
  let key = keys.get(hex);
  if (!key) {
    key = crypto.subtle.importKey("raw", hexBytes(hex), { name: "Ed25519" }, false, ["verify"]);
    key.catch(() => keys.delete(hex));
    keys.set(hex, key);
  }
  return key;
}

function isInteraction(body: unknown): body is Interaction {
  const b = body as Partial<Interaction> | null;
  return typeof b === "object" && b !== null && typeof b.id === "string" && typeof b.type === "number";
}

function ephemeral(content: string): Received["answer"] {
  return { status: 200, body: { type: 4, data: { content, flags: EPHEMERAL } } };
}

/** The SPEC §4 message of a slash command interaction, or a reason it is not one. */
export function normalizeDiscord(i: Interaction, app: App, now: number): PlatformMessage | string {
  if (i.data?.name !== app.command) return `only /${app.command} is understood here`;
  const option = i.data.options?.find((o) => o.name === "message");
  const text = typeof option?.value === "string" ? option.value : "";
  if (text.trim() === "") return `say something: /${app.command} message:<text>`;
  const user = i.member?.user ?? i.user;
  if (!user?.id || !i.token) return "this interaction has no user or token";
  if (user.bot) return "bots are not answered";
  const channelId = i.channel_id ?? i.channel?.id;
  const inbound: InboundMessage = {
    messageId: i.id,
    chatType: i.guild_id ? "channel" : "direct",
    from: user.id,
    text,
  };
  if (i.guild_id) {
    if (!channelId) return "this interaction has no channel";
    inbound.groupId = channelId;
    if (i.channel?.name) inbound.groupChannel = i.channel.name;
    inbound.groupSpace = i.guild_id;
  }
  const name = i.member?.nick ?? user.global_name ?? user.username;
  if (name) inbound.senderName = name;
  inbound.timestamp = now;
  const context: ReplyContext = { token: i.token, at: now, ...(channelId ? { channelId } : {}) };
  // A command is addressed to the bot: it counts as a mention.
  return { inbound, mentioned: true, replyContext: JSON.stringify(context) };
}

function contextOf(raw: string | undefined): ReplyContext | undefined {
  if (!raw) return undefined;
  try {
    const parsed = ReplyContextSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function base(app: App): string {
  return app.apiBaseUrl.replace(/\/+$/, "");
}

function botHeaders(app: App, secrets: Secrets): Record<string, string> {
  const token = app.botTokenEnv ? secrets[app.botTokenEnv] : undefined;
  return { "content-type": "application/json", ...(token ? { authorization: `Bot ${token}` } : {}) };
}

export const discord: PlatformConnector<DiscordConfig> = {
  type: "discord",
  maxChars: MAX_CHARS,

  secretNames: (app) =>
    app.botTokenEnv ? [{ env: app.botTokenEnv, path: "botTokenEnv", required: false }] : [],

  async verify(req, app) {
    const signature = req.headers.get(SIGNATURE);
    const timestamp = req.headers.get(TIMESTAMP);
    if (!signature || !timestamp) return { ok: false, reason: `missing ${SIGNATURE} or ${TIMESTAMP} header` };
    if (!/^[0-9a-fA-F]{128}$/.test(signature))
      return { ok: false, reason: `${SIGNATURE} is not 64 bytes of hex` };
    try {
      const valid = await crypto.subtle.verify(
        { name: "Ed25519" },
        await publicKey(app.publicKey.toLowerCase()),
        hexBytes(signature),
        new TextEncoder().encode(timestamp + req.raw),
      );
      return valid ? { ok: true } : { ok: false, reason: `${SIGNATURE} does not match` };
    } catch (error) {
      return {
        ok: false,
        reason: `the signature could not be checked: ${error instanceof Error ? error.message : error}`,
      };
    }
  },

  receive(body, app): Received {
    if (!isInteraction(body)) throw new Error("not a Discord interaction: `id` and `type` are required");
    if (body.type === 1) return { answer: { status: 200, body: { type: 1 } }, messages: [] };
    if (body.type !== 2)
      return { answer: ephemeral(`Only /${app.command} is understood here.`), messages: [] };
    const message = normalizeDiscord(body, app, Date.now());
    if (typeof message === "string")
      return { answer: ephemeral(`${message[0]?.toUpperCase()}${message.slice(1)}.`), messages: [] };
    return { answer: { status: 200, body: { type: 5 } }, messages: [message] };
  },

  async send(out, app, secrets, onPart) {
    const context = contextOf(out.replyContext);
    // The interaction's webhook while its token lasts; then (or once Discord says it is no
    // longer valid) the channel, with the bot token.
    let viaHook = !!context && Date.now() - context.at < TOKEN_LIFETIME_MS;
    const hasBot = !!app.botTokenEnv && !!secrets[app.botTokenEnv];
    const post = async (content: string, i: number) => {
      let url: string;
      let method = "POST";
      let headers: Record<string, string> = { "content-type": "application/json" };
      if (viaHook && context) {
        const hook = `${base(app)}/webhooks/${app.applicationId}/${context.token}`;
        // The deferred response is the first part; the rest follow it.
        [url, method] = i === 0 ? [`${hook}/messages/@original`, "PATCH"] : [hook, "POST"];
      } else {
        url = `${base(app)}/channels/${context?.channelId ?? out.to}/messages`;
        headers = botHeaders(app, secrets);
      }
      const a = await callApi(url, { method, headers, body: JSON.stringify({ content }) });
      return { a, via: viaHook ? "interaction webhook" : "channel" };
    };
    return postParts(
      splitText(out.text, MAX_CHARS),
      out.partsSent,
      async (content, i) => {
        if (!viaHook && !hasBot) {
          return {
            ok: false,
            error:
              "the interaction token has expired and no bot token is set (botTokenEnv): nothing can post this",
            permanent: true,
          };
        }
        let { a, via } = await post(content, i);
        if (!isFailure(a) && viaHook && (a.status === 401 || a.status === 404) && hasBot) {
          viaHook = false;
          ({ a, via } = await post(content, i));
        }
        if (isFailure(a)) return a;
        const r = (a.json ?? {}) as { message?: string; retry_after?: number };
        const wait =
          retryAfterHeader(a.headers) ??
          (r.retry_after !== undefined ? Math.ceil(r.retry_after * 1000) : undefined);
        return classifyStatus(a, `Discord (${via})`, brief(r.message ?? a.text), wait);
      },
      onPart,
    );
  },

  async setup(webhookUrl, app, secrets) {
    if (!app.botTokenEnv || !secrets[app.botTokenEnv]) {
      return {
        ok: false,
        detail:
          "registering the command needs the bot token: set connectors.<channel>.botTokenEnv and its secret",
      };
    }
    const a = await callApi(`${base(app)}/applications/${app.applicationId}/commands`, {
      method: "PUT",
      headers: botHeaders(app, secrets),
      body: JSON.stringify([
        {
          name: app.command,
          type: 1,
          description: "Talk to the agent",
          options: [{ type: 3, name: "message", description: "What to say", required: true }],
          // Guilds, the bot's DMs and private channels; installed to guilds and to users.
          contexts: [0, 1, 2],
          integration_types: [0, 1],
        },
      ]),
    });
    if (isFailure(a)) return { ok: false, detail: `command registration: ${a.error}` };
    if (a.status >= 300)
      return { ok: false, detail: `command registration answered ${a.status}: ${brief(a.text)}` };
    return {
      ok: true,
      detail: `registered /${app.command}; now set the Interactions Endpoint URL in the Developer Portal (General Information) to ${webhookUrl}`,
    };
  },

  async check(app, secrets) {
    if (!app.botTokenEnv || !secrets[app.botTokenEnv]) {
      return {
        ok: true,
        detail: "no bot token configured: replies only while an interaction's token is valid (15 minutes)",
      };
    }
    const a = await callApi(`${base(app)}/users/@me`, { method: "GET", headers: botHeaders(app, secrets) });
    if (isFailure(a)) return { ok: false, detail: `users/@me: ${a.error}` };
    const r = (a.json ?? {}) as { username?: string; id?: string };
    return a.status < 300
      ? { ok: true, detail: `users/@me: the token is bot ${r.username ?? r.id}` }
      : { ok: false, detail: `users/@me answered ${a.status}: ${brief(a.text)}` };
  },
};
