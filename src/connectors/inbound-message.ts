/**
 * The inbound message of SPEC §4: what the signed bridge posts to `/hooks/inbound/:channel`,
 * and what every platform connector normalizes its platform's messages to, so that keys,
 * dedupe, queueing, commands and policies are the one pipeline's (routes/inbound-pipeline.ts).
 */
import { z } from "zod";

const optionalText = z.string().max(1000).optional();

export const InboundMessage = z
  .strictObject({
    messageId: z.string().min(1).max(256),
    accountId: z.string().max(128).optional(),
    chatType: z.enum(["direct", "group", "channel"]),
    from: z.string().min(1).max(256),
    to: z.string().max(256).optional(),
    groupId: z.string().min(1).max(256).optional(),
    threadId: z.string().min(1).max(256).optional(),
    topic: z.boolean().optional(),
    text: z.string().max(200_000).default(""),
    attachments: z
      .array(
        z.strictObject({
          type: z.string().max(64).optional(),
          url: z.string().max(4096).optional(),
          name: z.string().max(512).optional(),
          mimeType: z.string().max(128).optional(),
          /** Its size in bytes, when the platform says it (a larger one than media.maxBytes: a notice, no run). */
          bytes: z.int().nonnegative().optional(),
          /** A platform connector's file id, fetched through the connector (never the bridge's). */
          ref: z.string().max(1024).optional(),
        }),
      )
      .max(32)
      .optional(),
    senderName: optionalText,
    conversationLabel: optionalText,
    groupSubject: optionalText,
    groupChannel: optionalText,
    groupSpace: optionalText,
    agentId: z.string().min(1).max(64).optional(),
    timestamp: z.number().int().nonnegative().optional(),
  })
  .superRefine((m, ctx) => {
    if (m.chatType !== "direct" && !m.groupId) {
      ctx.addIssue({
        code: "custom",
        path: ["groupId"],
        message: `is required when chatType is "${m.chatType}"`,
      });
    }
    if (m.text.trim() === "" && !m.attachments?.length) {
      ctx.addIssue({
        code: "custom",
        path: ["text"],
        message: "must not be empty (unless attachments are sent)",
      });
    }
  });
export type InboundMessage = z.output<typeof InboundMessage>;

/** The text a run sees: the message's text, then a line per attachment. */
export function messageText(m: InboundMessage): string {
  const lines = m.text ? [m.text] : [];
  for (const a of m.attachments ?? []) {
    lines.push(
      `[attachment${a.type ? ` ${a.type}` : ""}: ${a.name ?? "unnamed"}${a.mimeType ? ` (${a.mimeType})` : ""}${a.url ? ` ${a.url}` : ""}]`,
    );
  }
  return lines.join("\n");
}

/** A file a message carries, as its run fetches it (the transcript's MediaRef, SPEC §22). */
export interface AttachmentRef {
  kind: "image" | "audio" | "file";
  ref?: string;
  url?: string;
  mimeType?: string;
  name?: string;
  bytes?: number;
}

/** What kind of file an attachment is: its `type` if it says, else its MIME type's family. */
export function attachmentKind(a: {
  type?: string | undefined;
  mimeType?: string | undefined;
}): AttachmentRef["kind"] {
  const type = a.type?.toLowerCase();
  if (type === "image" || type === "photo") return "image";
  if (type === "audio" || type === "voice") return "audio";
  if (type === "file" || type === "document") return "file";
  if (a.mimeType?.startsWith("image/")) return "image";
  if (a.mimeType?.startsWith("audio/")) return "audio";
  return "file";
}

/**
 * The files a message carries, to be fetched by its run (SPEC §22): a platform's file id, or an
 * https URL (the bridge's; any other URL stays a line of the message's text).
 */
export function mediaRefs(m: InboundMessage): AttachmentRef[] {
  const refs: AttachmentRef[] = [];
  for (const a of m.attachments ?? []) {
    const url = a.url?.startsWith("https://") ? a.url : undefined;
    if (!a.ref && !url) continue;
    refs.push({
      kind: attachmentKind(a),
      ...(a.ref ? { ref: a.ref } : { url }),
      ...(a.mimeType ? { mimeType: a.mimeType } : {}),
      ...(a.name ? { name: a.name } : {}),
      ...(a.bytes !== undefined ? { bytes: a.bytes } : {}),
    });
  }
  return refs;
}
