/**
 * A Discord interaction as Switchboard reads it (SPEC §18, §22; discord.com/developers/docs/
 * interactions): the slash command's message and its `attachment` option as the SPEC §4 message,
 * where its posts go, and the reply context (the interaction's token, time and channel) a reply
 * needs while the token lasts. Pure: no request is made here (discord.ts makes them).
 */
import { z } from "zod";
import type { DiscordConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";
import type { Account, PlatformMessage } from "./types";

/** An interaction token lasts 15 minutes; past 14, the bot token posts instead. */
export const TOKEN_LIFETIME_MS = 14 * 60_000;
/** An interaction's `context`: a private channel of the user's own, where the bot is no member. */
const PRIVATE_CHANNEL = 2;

type App = Account<DiscordConfig>;

interface DiscordUser {
  id: string;
  username?: string;
  global_name?: string | null;
  bot?: boolean;
}

export interface Interaction {
  id: string;
  type: number;
  token?: string;
  application_id?: string;
  /** 0 a guild, 1 the bot's DM, 2 a private channel (a user-installed app elsewhere). */
  context?: number;
  guild_id?: string;
  channel_id?: string;
  channel?: { id?: string; name?: string };
  member?: { user?: DiscordUser; nick?: string | null };
  user?: DiscordUser;
  data?: {
    name?: string;
    options?: Array<{ name?: string; value?: unknown }>;
    /** The command's `attachment` option names one of these by id. */
    resolved?: { attachments?: Record<string, DiscordAttachment> };
  };
}

/** discord.com/developers/docs/resources/message#attachment-object */
interface DiscordAttachment {
  id?: string;
  filename?: string;
  size?: number;
  url?: string;
  content_type?: string;
}

type Attachment = NonNullable<InboundMessage["attachments"]>[number];

/** The file of the command's `attachment` option, fetched by its run from its CDN URL (SPEC §22). */
function attachmentOf(i: Interaction): Attachment | undefined {
  const id = i.data?.options?.find((o) => o.name === ATTACHMENT_OPTION)?.value;
  const file = typeof id === "string" ? i.data?.resolved?.attachments?.[id] : undefined;
  if (!file?.url) return undefined;
  const attachment: Attachment = { ref: file.url };
  if (file.content_type) attachment.mimeType = file.content_type;
  if (file.filename) attachment.name = file.filename;
  if (typeof file.size === "number" && file.size >= 0) attachment.bytes = file.size;
  return attachment;
}

/** The slash command's option that carries a file. */
export const ATTACHMENT_OPTION = "attachment";
/** Where Discord serves attachments (besides the API's own host, a local stand-in in tests). */
export const CDN_HOSTS = new Set(["cdn.discordapp.com", "media.discordapp.net"]);

/**
 * What a reply needs that the route does not carry: the interaction's token, time and channel;
 * kept with the run's route and its outbox row, not in D1.
 */
const ReplyContextSchema = z.looseObject({
  token: z.string(),
  at: z.number(),
  channelId: z.string().optional(),
});
export type ReplyContext = z.infer<typeof ReplyContextSchema>;

export function isInteraction(body: unknown): body is Interaction {
  const b = body as Partial<Interaction> | null;
  return typeof b === "object" && b !== null && typeof b.id === "string" && typeof b.type === "number";
}

/** The SPEC §4 message of a slash command interaction, or a reason it is not one. */
export function normalizeDiscord(i: Interaction, app: App, now: number): PlatformMessage | string {
  if (i.data?.name !== app.command) return `only /${app.command} is understood here`;
  const option = i.data.options?.find((o) => o.name === "message");
  const text = typeof option?.value === "string" ? option.value : "";
  const attachment = attachmentOf(i);
  if (text.trim() === "" && !attachment) return `say something: /${app.command} message:<text>`;
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
  if (attachment) inbound.attachments = [attachment];
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
  const message: PlatformMessage = { inbound, mentioned: true, replyContext: JSON.stringify(context) };
  // A DM's posts go to the bot's DM channel with the user, not to the user's id: the channel of a
  // command in the bot's DM is it. In a private channel of the user's own the bot cannot post,
  // so outside the interaction its DM with the user is opened instead.
  if (!i.guild_id)
    message.postTo = channelId && i.context !== PRIVATE_CHANNEL ? channelId : `user:${user.id}`;
  return message;
}

export function contextOf(raw: string | undefined): ReplyContext | undefined {
  if (!raw) return undefined;
  try {
    const parsed = ReplyContextSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
