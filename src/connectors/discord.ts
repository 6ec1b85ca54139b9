import type { DiscordConfig } from "../config/connectors";
import {
  ATTACHMENT_OPTION,
  CDN_HOSTS,
  contextOf,
  isInteraction,
  normalizeDiscord,
  TOKEN_LIFETIME_MS,
} from "./discord-interaction";
import {
  type ApiAnswer,
  brief,
  callApi,
  classifyStatus,
  isFailure,
  type PartFailure,
  postParts,
  retryAfterHeader,
} from "./platform-api";
import { splitText } from "./split";
import type { Account, PlatformConnector, Received, Secrets } from "./types";

export const SIGNATURE = "x-signature-ed25519";
export const TIMESTAMP = "x-signature-timestamp";
const MAX_CHARS = 2000;
/** The deferred response's id in an interaction webhook's paths. */
const ORIGINAL = "@original";

const EPHEMERAL = 64;
/** Discord's JSON error code for a channel it does not know. */
const UNKNOWN_CHANNEL = 10003;

type App = Account<DiscordConfig>;

/** Discord's error body (discord.com/developers/docs/topics/opcodes-and-status-codes). */
interface DiscordError {
  message?: string;
  code?: number;
  retry_after?: number;
}

/**
 * What a delivery's `to` names: `user:<id>` a user (posted to in the bot's DM channel with them),
 * `channel:<id>` or a bare id a channel (a guild's, or a DM channel a session's route keeps). A
 * bare id is never taken for a user: a Discord id does not say what it names, and a guild
 * channel's id is what the routes of guild chats and existing job configs hold.
 */
export type DiscordAddress = { kind: "user"; id: string } | { kind: "channel"; id: string };

export function addressOf(to: string): DiscordAddress {
  const m = /^(user|channel):(.+)$/.exec(to);
  if (m?.[1] === "user") return { kind: "user", id: m[2] as string };
  return { kind: "channel", id: m?.[2] ?? to };
}

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

function ephemeral(content: string): Received["answer"] {
  return { status: 200, body: { type: 4, data: { content, flags: EPHEMERAL } } };
}

function base(app: App): string {
  return app.apiBaseUrl.replace(/\/+$/, "");
}

function botHeaders(app: App, secrets: Secrets): Record<string, string> {
  const token = app.botTokenEnv ? secrets[app.botTokenEnv] : undefined;
  return { "content-type": "application/json", ...(token ? { authorization: `Bot ${token}` } : {}) };
}

/** Discord's own wait on a 429: `Retry-After`, else the body's `retry_after` (seconds). */
function waitOf(a: ApiAnswer, r: DiscordError): number | undefined {
  return (
    retryAfterHeader(a.headers) ?? (r.retry_after !== undefined ? Math.ceil(r.retry_after * 1000) : undefined)
  );
}

/** Why nothing can post without the bot token, naming the setting that gives it. */
function noBotToken(app: App, inInteraction: boolean): string {
  const why = inInteraction
    ? "the interaction token has expired"
    : "a post outside an interaction (a DM, a notice, job output) needs the bot token";
  const fix = app.botTokenEnv
    ? `its secret ${app.botTokenEnv} (botTokenEnv) is not set`
    : "no botTokenEnv is configured";
  return `${why}, and ${fix}: nothing can post this`;
}

/**
 * The bot's DM channel with a user: `POST /users/@me/channels {recipient_id}` with the bot token
 * answers the DM channel (the one there is, if there is one), whose `id` messages are posted to.
 * A refusal (an unknown user, one the bot may not write to) is dead with Discord's reason.
 *
 * Opened once per attempt of a delivery, not remembered past it: Discord answers the same
 * channel every time, so a retry that opens it again posts to the same place, and `partsSent`
 * alone decides which parts are still owed. Remembering it would take a cache (not shown to pay
 * for one call per job output) or a connector writing the session's state, which it never does;
 * a session's DMs need no opening at all, their route keeps the channel.
 */
async function openDm(app: App, secrets: Secrets, userId: string): Promise<string | PartFailure> {
  const what = `Discord (opening the DM with user ${userId})`;
  const a = await callApi(`${base(app)}/users/@me/channels`, {
    method: "POST",
    headers: botHeaders(app, secrets),
    body: JSON.stringify({ recipient_id: userId }),
  });
  if (isFailure(a)) return a;
  const r = (a.json ?? {}) as DiscordError & { id?: unknown };
  const refused = classifyStatus(a, what, brief(r.message ?? a.text), waitOf(a, r));
  if (refused) return refused;
  if (typeof r.id === "string" && r.id) return r.id;
  return { ok: false, error: `${what} answered ${a.status} without a channel id` };
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
    const address = addressOf(out.to);
    // The interaction's webhook while its token lasts; then (or once Discord says it is no
    // longer valid) the channel, with the bot token.
    let viaHook = !!context && Date.now() - context.at < TOKEN_LIFETIME_MS;
    const hasBot = !!app.botTokenEnv && !!secrets[app.botTokenEnv];
    // The channel the bot token posts in: a channel's own id (for an interaction's reply, the
    // channel it came from), or a user's DM channel, opened when this attempt first needs it.
    let channelId = address.kind === "channel" ? (context?.channelId ?? address.id) : undefined;
    const post = async (content: string, i: number): Promise<{ a: ApiAnswer | PartFailure; via: string }> => {
      const body = JSON.stringify({ content });
      if (viaHook && context) {
        const hook = `${base(app)}/webhooks/${app.applicationId}/${context.token}`;
        // The deferred response is the first part; the rest follow it.
        const [url, method] = i === 0 ? [`${hook}/messages/@original`, "PATCH"] : [hook, "POST"];
        const a = await callApi(url, { method, headers: { "content-type": "application/json" }, body });
        return { a, via: "interaction webhook" };
      }
      if (channelId === undefined) {
        const opened = await openDm(app, secrets, address.id);
        if (typeof opened !== "string") return { a: opened, via: "DM" };
        channelId = opened;
      }
      const a = await callApi(`${base(app)}/channels/${channelId}/messages`, {
        method: "POST",
        headers: botHeaders(app, secrets),
        body,
      });
      return { a, via: address.kind === "user" ? "DM channel" : "channel" };
    };
    return postParts(
      splitText(out.text, MAX_CHARS),
      out.partsSent,
      async (content, i) => {
        if (!viaHook && !hasBot) return { ok: false, error: noBotToken(app, !!context), permanent: true };
        let { a, via } = await post(content, i);
        if (!isFailure(a) && viaHook && (a.status === 401 || a.status === 404) && hasBot) {
          viaHook = false;
          ({ a, via } = await post(content, i));
        }
        if (isFailure(a)) return a;
        const r = (a.json ?? {}) as DiscordError;
        let reason = brief(r.message ?? a.text);
        // A bare id Discord has no channel for is most likely a user's: say how to name one.
        if (via === "channel" && a.status === 404 && r.code === UNKNOWN_CHANNEL)
          reason += ` (to write to a user in their DMs, address them as user:<id>)`;
        return classifyStatus(a, `Discord (${via})`, reason, waitOf(a, r));
      },
      onPart,
    );
  },

  async fileSource(ref, app) {
    // An attachment's URL is signed by Discord: fetched as it is, from Discord's CDN only.
    let host = "";
    try {
      const url = new URL(ref);
      host =
        url.protocol === "https:" || url.hostname === new URL(app.apiBaseUrl).hostname ? url.hostname : "";
    } catch {
      host = "";
    }
    if (!host || !(CDN_HOSTS.has(host) || host === new URL(app.apiBaseUrl).hostname))
      return {
        ok: false,
        error: `a Discord attachment is fetched from Discord's CDN only (got ${ref.slice(0, 80)})`,
        permanent: true,
      };
    return { ok: true, url: ref };
  },

  // The preview is the deferred response itself, edited while the interaction's token lasts;
  // the reply then takes its place (SPEC §22). Outside an interaction there is none.
  preview: {
    inPlace: true,
    async show(target, text, _messageId, app) {
      const context = contextOf(target.replyContext);
      if (!context || Date.now() - context.at >= TOKEN_LIFETIME_MS)
        return { ok: false, error: "a Discord preview needs a live interaction" };
      const a = await callApi(
        `${base(app)}/webhooks/${app.applicationId}/${context.token}/messages/${ORIGINAL}`,
        {
          method: "PATCH",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ content: text }),
        },
      );
      if (isFailure(a)) return { ok: false, error: `Discord (preview): ${a.error}` };
      if (a.status >= 300)
        return { ok: false, error: `Discord (preview) answered ${a.status}: ${brief(a.text)}` };
      return { ok: true, messageId: ORIGINAL };
    },
    async remove(target, _messageId, app) {
      const context = contextOf(target.replyContext);
      if (!context) return false;
      const a = await callApi(
        `${base(app)}/webhooks/${app.applicationId}/${context.token}/messages/${ORIGINAL}`,
        {
          method: "DELETE",
        },
      );
      return !isFailure(a) && a.status < 300;
    },
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
          // 3: a string, 11: an attachment (a photo, a voice note, a file).
          options: [
            { type: 3, name: "message", description: "What to say", required: false },
            { type: 11, name: ATTACHMENT_OPTION, description: "A file to show", required: false },
          ],
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
