/**
 * A reply's preview on its chat (SPEC §22 streaming), as the connector shows it: a platform's
 * message posted, edited and deleted through its API (connectors/*.ts `preview`), or the signed
 * bridge's `{ kind: "preview", deliveryId, text }` POSTs when it opted in. What the preview shows
 * and when it is edited is the run's business (session/run/preview.ts); this module only makes
 * the calls. A preview is best effort: a failed call is reported, never retried, and the final
 * reply is the outbox's delivery either way (deliver.ts).
 */
import { SIGNATURE_HEADER, signBody } from "../auth/signature";
import { type PreviewMode, streamingOf } from "../config/connectors";
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";
import { accountWith } from "../connectors/registry";
import type { PreviewResult, PreviewTarget } from "../connectors/types";
import type { DeliveryContext } from "../db/json-columns";
import { ATTEMPT_TIMEOUT_MS } from "./deliver";

/** Where a run's preview is shown, and how often it may change. */
export interface PreviewPort {
  mode: Exclude<PreviewMode, "off">;
  minIntervalMs: number;
  /** Posts the preview (`messageId` undefined) or edits it. */
  show(text: string, messageId: string | undefined): Promise<PreviewResult>;
  /** Deletes it (where the platform can); false when that failed. */
  remove(messageId: string): Promise<boolean>;
  /** The final reply edits the preview into itself (`partial`, or Discord's deferred response). */
  finalEdits: boolean;
  /** The longest text one preview shows whole (a longer one shows its start). */
  maxChars: number;
}

/** A preview longer than one message shows its start. */
function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The preview port of a reply's route, or undefined when its connector streams nothing
 * (`streaming.mode` off, WhatsApp, a bridge that did not opt in, an unknown account or a
 * missing secret). `deliveryId` names the final reply the bridge's previews lead to.
 */
export function previewPort(
  route: DeliveryContext & { replyToMessageId?: string; replyContext?: string },
  deliveryId: string,
  sessionKey: string,
  config: Config,
  env: Env,
): PreviewPort | undefined {
  const connector = ownEntry(config.connectors, route.channel);
  if (!connector) return undefined;
  const { mode, minIntervalMs } = streamingOf(connector);
  if (mode === "off") return undefined;
  if (connector.type === "webhook") {
    const secret = (env as unknown as Record<string, unknown>)[connector.secretEnv];
    const url = connector.deliverUrl;
    if (!url || typeof secret !== "string" || !secret) return undefined;
    return {
      mode,
      minIntervalMs,
      finalEdits: true,
      maxChars: Number.POSITIVE_INFINITY,
      show: async (text) => {
        const body = JSON.stringify({
          kind: "preview",
          deliveryId,
          sessionKey,
          channel: route.channel,
          accountId: route.accountId,
          to: route.postTo ?? route.to,
          ...(route.threadId ? { threadId: route.threadId } : {}),
          text,
        });
        try {
          const res = await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(secret, body) },
            body,
            signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
          });
          await res.body?.cancel();
          return res.ok
            ? { ok: true, messageId: deliveryId }
            : { ok: false, error: `connector answered ${res.status}` };
        } catch (error) {
          return {
            ok: false,
            error: `connector unreachable: ${error instanceof Error ? error.message : error}`,
          };
        }
      },
      // The bridge replaces its preview with the delivery of the same deliveryId.
      remove: async () => true,
    };
  }
  const found = accountWith(connector, route.accountId, env);
  const api = found?.module.preview;
  if (!found || !api || found.missing.length) return undefined;
  const target: PreviewTarget = { to: route.postTo ?? route.to };
  if (route.threadId) target.threadId = route.threadId;
  if (route.replyToMessageId) target.replyToMessageId = route.replyToMessageId;
  if (route.replyContext) target.replyContext = route.replyContext;
  const max = found.module.maxChars;
  return {
    mode,
    minIntervalMs,
    finalEdits: mode === "partial" || api.inPlace === true,
    maxChars: max,
    show: (text, messageId) => api.show(target, clip(text, max), messageId, found.account, found.secrets),
    remove: (messageId) => api.remove(target, messageId, found.account, found.secrets),
  };
}
