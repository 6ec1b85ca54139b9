/**
 * `connectors.<channel>` (SPEC §14, §18): the signed bridge (`type: "webhook"`, the default) or
 * one of the chat platforms spoken to directly, each with the names of its secrets, its API's
 * base URL (a local fake in tests), more bots on one channel (`accounts`), and who may talk to
 * it (`dmPolicy`, `allowFrom`, `groups`). A platform's fields are declared here once; its
 * module (src/connectors/) reads them.
 */
import { z } from "zod";
import { EnvName, formatValue, HttpUrl, Id } from "./fields";

const NonEmpty = z.string().trim().min(1);

/** Who may talk to a connector (SPEC §18 "Access"). */
const AccessFields = {
  /** Default: `pairing` for a platform, `open` for the signed bridge. */
  dmPolicy: z.enum(["pairing", "allowlist", "open"]).optional(),
  /** Peer ids (as the platform gives them) or identityLinks names always allowed in direct chats. */
  allowFrom: z.array(NonEmpty).default(() => []),
  groups: z
    .strictObject({
      policy: z.enum(["open", "allowlist", "disabled"]).default("open"),
      allow: z.array(NonEmpty).default(() => []),
      /** Default: on for a platform, off for the signed bridge (its messages carry no mentions). */
      requireMention: z.boolean().optional(),
    })
    .prefault({}),
};

/** Edits one preview apart at least this long by default (SPEC §22 `minIntervalMs`). */
export const PREVIEW_INTERVAL_MS = 1_000;

/** `streaming` (SPEC §22): what a chat sees while the model writes a reply. */
function streamingField<M extends readonly [string, ...string[]]>(modes: M) {
  return z
    .strictObject({
      mode: z.enum(modes),
      /** At least this long between two edits of a chat's preview (a platform's floor applies). */
      minIntervalMs: z.number().int().min(250).max(60_000).optional(),
    })
    .optional();
}

const WebhookConnector = z.strictObject({
  type: z.literal("webhook"),
  deliverUrl: HttpUrl.optional(),
  secretEnv: EnvName,
  accounts: z.array(Id).optional(),
  /** Opt-in: signed `{ kind: "preview", deliveryId, text }` POSTs before the final delivery. */
  streaming: streamingField(["off", "partial"]),
  ...AccessFields,
});

const TelegramBot = {
  botTokenEnv: EnvName,
  webhookSecretEnv: EnvName,
  /** Without the "@"; what a group message must mention when `groups.requireMention`. */
  botUsername: z
    .string()
    .trim()
    .regex(/^@?[A-Za-z0-9_]{3,64}$/, {
      error: (iss) => `must be a Telegram bot username (got ${formatValue(iss.input)})`,
    })
    .transform((u) => u.replace(/^@/, ""))
    .optional(),
  apiBaseUrl: HttpUrl.default("https://api.telegram.org"),
};

const SlackApp = {
  signingSecretEnv: EnvName,
  botTokenEnv: EnvName,
  /** The bot's user id (`U…`): its own messages are ignored, `<@id>` is a mention. */
  botUserId: NonEmpty.optional(),
  apiBaseUrl: HttpUrl.default("https://slack.com/api"),
};

const DiscordApp = {
  botTokenEnv: EnvName.optional(),
  publicKey: z.string().regex(/^[0-9a-fA-F]{64}$/, {
    error: (iss) =>
      `must be the application's Ed25519 public key, 64 hex characters (got ${formatValue(iss.input)})`,
  }),
  applicationId: z.string().regex(/^\d{5,32}$/, {
    error: (iss) => `must be the application's id, digits (got ${formatValue(iss.input)})`,
  }),
  command: z
    .string()
    .regex(/^[-_a-z0-9]{1,32}$/, {
      error: (iss) =>
        `must be a slash command name: 1-32 of a-z, 0-9, "-", "_" (got ${formatValue(iss.input)})`,
    })
    .default("ask"),
  apiBaseUrl: HttpUrl.default("https://discord.com/api/v10"),
};

const WhatsAppNumber = {
  appSecretEnv: EnvName,
  verifyTokenEnv: EnvName,
  accessTokenEnv: EnvName,
  phoneNumberId: z.string().regex(/^\d{5,32}$/, {
    error: (iss) => `must be the WhatsApp phone number id, digits (got ${formatValue(iss.input)})`,
  }),
  apiBaseUrl: HttpUrl.default("https://graph.facebook.com/v21.0"),
};

/** A platform connector: its own fields, the same again per extra account, access and streaming. */
function platform<T extends string, F extends z.ZodRawShape, S extends z.ZodType>(
  type: T,
  fields: F,
  streaming: S,
) {
  return z.strictObject({
    type: z.literal(type),
    ...fields,
    accountId: Id.default("default"),
    accounts: z.record(Id, z.strictObject(fields)).default(() => ({})),
    streaming,
    ...AccessFields,
  });
}

const PREVIEW_MODES = ["off", "partial", "progress"] as const;
const TelegramConnector = platform("telegram", TelegramBot, streamingField(PREVIEW_MODES));
const SlackConnector = platform("slack", SlackApp, streamingField(PREVIEW_MODES));
const DiscordConnector = platform("discord", DiscordApp, streamingField(PREVIEW_MODES));
// The Cloud API cannot edit a message: nothing to stream into.
const WhatsAppConnector = platform("whatsapp", WhatsAppNumber, streamingField(["off"]));

export const PLATFORM_TYPES = ["telegram", "slack", "discord", "whatsapp"] as const;
export type PlatformType = (typeof PLATFORM_TYPES)[number];

/** `type` defaults to `webhook`, so a config written before platforms existed means what it did. */
export const ConnectorSchema = z.preprocess(
  (v) =>
    v !== null && typeof v === "object" && !Array.isArray(v) && !("type" in v)
      ? { ...v, type: "webhook" }
      : v,
  z.discriminatedUnion(
    "type",
    [WebhookConnector, TelegramConnector, SlackConnector, DiscordConnector, WhatsAppConnector],
    {
      error: (iss) => {
        const given = (iss.input as { type?: unknown } | undefined)?.type;
        return `must be one of ${["webhook", ...PLATFORM_TYPES].map((t) => JSON.stringify(t)).join(", ")} (got ${formatValue(given)})`;
      },
    },
  ),
);
export type ConnectorConfig = z.output<typeof ConnectorSchema>;
export type WebhookConnectorConfig = z.output<typeof WebhookConnector>;
export type PlatformConnectorConfig = Exclude<ConnectorConfig, WebhookConnectorConfig>;
export type TelegramConfig = z.output<typeof TelegramConnector>;
export type SlackConfig = z.output<typeof SlackConnector>;
export type DiscordConfig = z.output<typeof DiscordConnector>;
export type WhatsAppConfig = z.output<typeof WhatsAppConnector>;

/** The access rules of a connector, with the default dmPolicy of its type applied. */
export function accessOf(c: ConnectorConfig) {
  const bridge = c.type === "webhook";
  return {
    dmPolicy: c.dmPolicy ?? (bridge ? "open" : "pairing"),
    allowFrom: c.allowFrom,
    groups: { ...c.groups, requireMention: c.groups.requireMention ?? !bridge },
  } as const;
}

/**
 * Platforms' own floors between two edits of one message (SPEC §22 "never within the platform's
 * rate limits' reach"): Telegram about one message a second per chat, Slack's `chat.update` Tier
 * 3 (50 a minute), Discord five requests per five seconds per webhook.
 */
const EDIT_FLOOR_MS: Record<ConnectorConfig["type"], number> = {
  webhook: 250,
  telegram: 1_000,
  slack: 1_200,
  discord: 1_000,
  whatsapp: 1_000,
};

export type PreviewMode = "off" | "partial" | "progress";

/** A connector's streaming with its type's default and floor applied (SPEC §22). */
export function streamingOf(c: ConnectorConfig): { mode: PreviewMode; minIntervalMs: number } {
  const fallback: PreviewMode = c.type === "webhook" || c.type === "whatsapp" ? "off" : "partial";
  return {
    mode: (c.streaming?.mode as PreviewMode | undefined) ?? fallback,
    minIntervalMs: Math.max(c.streaming?.minIntervalMs ?? PREVIEW_INTERVAL_MS, EDIT_FLOOR_MS[c.type]),
  };
}

/** A platform connector's fields for one of its accounts (its own, or an `accounts` entry). */
export function accountOf<C extends PlatformConnectorConfig>(
  c: C,
  accountId: string,
): Omit<C, "accounts" | "accountId"> | undefined {
  if (accountId === c.accountId) return c;
  const extra = Object.hasOwn(c.accounts, accountId) ? c.accounts[accountId] : undefined;
  return extra ? ({ ...c, ...extra } as C) : undefined;
}
export type AccessRules = ReturnType<typeof accessOf>;

/** The account ids a connector answers for; undefined: any (a bridge without `accounts`). */
export function accountIdsOf(c: ConnectorConfig): string[] | undefined {
  if (c.type === "webhook") return c.accounts;
  return [c.accountId, ...Object.keys(c.accounts)];
}
