/**
 * What a platform connector is (SPEC §18): a verifier, a normalizer and a sender, as each chat
 * platform's own SDKs keep them apart. A connector module knows its platform's requests, payloads
 * and API, and nothing of sessions: the route hands what it normalizes to the one inbound
 * pipeline, and the session outbox hands it what to send. Adding a platform is a module of this
 * shape, its config fields (config/connectors.ts) and a line in registry.ts.
 */
import type { PlatformConnectorConfig } from "../config/connectors";
import type { InboundMessage } from "./inbound-message";

/** A connector's fields for one account (a bot, an app, a phone number). */
export type Account<C extends PlatformConnectorConfig = PlatformConnectorConfig> = Omit<
  C,
  "accounts" | "accountId"
>;

/** Secret values by env name (unset ones are undefined). */
export type Secrets = Readonly<Record<string, string | undefined>>;

/** A webhook request as the platform sent it. */
export interface PlatformRequest {
  url: URL;
  headers: Headers;
  /** The raw body: signatures are over these exact bytes. */
  raw: string;
  /** The time verification measures skew against. */
  now: number;
}

export type Verified = { ok: true } | { ok: false; reason: string };

/** One message of a verified request, normalized to SPEC §4, with what access rules need. */
export interface PlatformMessage {
  inbound: InboundMessage;
  /** The message mentions the bot or replies to it (`groups.requireMention`). */
  mentioned: boolean;
  /** The platform's id of the message a reply answers (default: `inbound.messageId`). */
  replyTo?: string;
  /** What the sender needs to answer it that the route does not say (an interaction token). */
  replyContext?: string;
  /**
   * Where the chat's posts go when that is not its peer or group id, kept on the session's route
   * (no secrets: it is stored in D1): a Discord DM is the user's DM channel, not the user.
   */
  postTo?: string;
}

/** A message to post that is not a run's reply: a short notice answering what was not run. */
export interface DirectNotice {
  to: string;
  threadId?: string;
  text: string;
}

/** What a connector makes of a verified request. */
export interface Received {
  /** The answer the platform expects, within its deadline (sent before any run). */
  answer: { status: number; body?: unknown };
  /** Messages to hand to the pipeline (none for pings, edits, statuses, bots). */
  messages: PlatformMessage[];
  /** Notices to post at once without a run (WhatsApp: only text is understood). */
  notices?: DirectNotice[];
}

/** One delivery to post. */
export interface Outgoing {
  to: string;
  threadId?: string;
  text: string;
  replyToMessageId?: string;
  replyContext?: string;
  /** Parts of this text the platform accepted before (a retry goes on from the next). */
  partsSent: number;
}

/**
 * A run's preview (SPEC §22 streaming): where it goes (the reply's route) and, once posted, its
 * id on the platform.
 */
export interface PreviewTarget {
  to: string;
  threadId?: string;
  replyToMessageId?: string;
  replyContext?: string;
}

/** A preview's post or edit: the message's id, or why not (a preview is best effort, never retried). */
export type PreviewResult = { ok: true; messageId: string } | { ok: false; error: string };

/** How a platform shows a preview and takes it away again. */
export interface PreviewApi<C extends PlatformConnectorConfig = PlatformConnectorConfig> {
  /** Posts the preview (`messageId` undefined) or edits it to `text`. */
  show(
    target: PreviewTarget,
    text: string,
    messageId: string | undefined,
    account: Account<C>,
    secrets: Secrets,
  ): Promise<PreviewResult>;
  /** Deletes it; false when the platform refused. */
  remove(target: PreviewTarget, messageId: string, account: Account<C>, secrets: Secrets): Promise<boolean>;
  /** The final reply always takes the preview's place (Discord's deferred response), never deletes it. */
  readonly inPlace?: boolean;
}

/** How posting ended: sent, to retry (after the platform's own wait when it gave one), or dead. */
export type SendResult =
  | { ok: true }
  | { ok: false; error: string; retryAfterMs?: number; permanent?: boolean; partsSent: number };

/** Where a platform's file is downloaded from (SPEC §22), or why it cannot be. */
export type FileSource =
  | { ok: true; url: string; headers?: Record<string, string> }
  | { ok: false; error: string; permanent: boolean };

/** A platform call's outcome, for setup and checks. */
export interface Report {
  ok: boolean;
  detail: string;
}

export interface PlatformConnector<C extends PlatformConnectorConfig = PlatformConnectorConfig> {
  readonly type: C["type"];
  /** The most characters one message may hold. */
  readonly maxChars: number;
  /** The env names of an account's secrets; `required` ones disable the connector when unset. */
  secretNames(account: Account<C>): { env: string; path: string; required: boolean }[];
  /** A GET on the webhook route (WhatsApp's subscription handshake); absent: 405. */
  handshake?(url: URL, account: Account<C>, secrets: Secrets): { status: number; body: string };
  /** Checks a request as the platform signs it; nothing is stored for one that fails. */
  verify(req: PlatformRequest, account: Account<C>, secrets: Secrets): Promise<Verified>;
  /** What a verified request holds. `body` is its JSON; throws a message for a malformed one. */
  receive(body: unknown, account: Account<C>): Received;
  /** Posts a message through the platform's API, part after part; `onPart` records progress. */
  send(
    out: Outgoing,
    account: Account<C>,
    secrets: Secrets,
    onPart: (partsSent: number) => void,
  ): Promise<SendResult>;
  /**
   * Where the file the platform names `ref` (an attachment's `ref`) is downloaded from, with
   * the platform's own auth; absent: the platform's attachments carry a plain URL.
   */
  fileSource?(ref: string, account: Account<C>, secrets: Secrets): Promise<FileSource>;
  /**
   * The size the platform gives a file whose message does not say it (WhatsApp's media id), so
   * one past `media.maxBytes` is refused before a run; undefined when it cannot tell within
   * `timeoutMs` (the webhook's answer waits on it).
   */
  fileSize?(
    ref: string,
    account: Account<C>,
    secrets: Secrets,
    timeoutMs: number,
  ): Promise<number | undefined>;
  /** Previews of a reply being written (SPEC §22), where the platform can edit a message. */
  readonly preview?: PreviewApi<C>;
  /** Shows the chat that the agent is at work (Telegram's typing), where the platform has it. */
  activity?(to: string, threadId: string | undefined, account: Account<C>, secrets: Secrets): Promise<void>;
  /** Registers the webhook where the platform has an API for it, or says what to paste where. */
  setup(webhookUrl: string, account: Account<C>, secrets: Secrets): Promise<Report>;
  /** Asks the platform who the bot is, where it has an endpoint for it. */
  check(account: Account<C>, secrets: Secrets): Promise<Report>;
}
