/**
 * The pure parts of media in (SPEC §22): a platform's attachments as the run's file references,
 * Telegram's photo / voice / document fields, a stored file's id and key, and what a model is
 * given of a message's files (image input, a text file inline, a line naming the rest).
 */
import { describe, expect, it } from "vitest";
import { toModelMessages } from "../../src/agent/context";
import { attachmentKind, InboundMessage, mediaRefs } from "../../src/connectors/inbound-message";
import { normalizeTelegram } from "../../src/connectors/telegram";
import { mediaIdOf, mediaKey } from "../../src/db/media-store";
import { mediaLine, type TranscriptMessage } from "../../src/transcript/message";

const bot = {
  type: "telegram",
  botTokenEnv: "T",
  webhookSecretEnv: "W",
  apiBaseUrl: "https://t.test",
} as never;

describe("attachments", () => {
  it("are images, audio or files by their type, else by their MIME type", () => {
    expect(attachmentKind({ type: "photo" })).toBe("image");
    expect(attachmentKind({ type: "voice" })).toBe("audio");
    expect(attachmentKind({ type: "document", mimeType: "image/png" })).toBe("file");
    expect(attachmentKind({ mimeType: "audio/mpeg" })).toBe("audio");
    expect(attachmentKind({ mimeType: "application/pdf" })).toBe("file");
  });

  it("only a platform's id or an https URL is fetched; anything else stays a line of the text", () => {
    const m = InboundMessage.parse({
      messageId: "1",
      chatType: "direct",
      from: "a",
      text: "hi",
      attachments: [
        { url: "https://x.test/a.png", mimeType: "image/png" },
        { url: "http://x.test/plain.txt", name: "plain.txt" },
        { ref: "file-9", type: "voice", bytes: 12 },
      ],
    });
    expect(mediaRefs(m)).toEqual([
      { kind: "image", url: "https://x.test/a.png", mimeType: "image/png" },
      { kind: "audio", ref: "file-9", bytes: 12 },
    ]);
  });

  it("Telegram: the largest photo size, a voice note and a document; a message of files alone is one", () => {
    const normalized = normalizeTelegram(
      77,
      {
        message_id: 5,
        chat: { id: 42, type: "private" },
        from: { id: 42, first_name: "Ann" },
        photo: [
          { file_id: "s", file_size: 10 },
          { file_id: "l", file_size: 900 },
        ],
        voice: { file_id: "v", mime_type: "audio/ogg", file_size: 33 },
        document: { file_id: "d", file_name: "a.pdf", mime_type: "application/pdf", file_size: 5 },
      },
      bot,
    );
    expect(normalized?.inbound.text).toBe("");
    expect(normalized?.inbound.attachments).toEqual([
      { type: "image", ref: "l", mimeType: "image/jpeg", name: "photo.jpg", bytes: 900 },
      { type: "voice", ref: "v", mimeType: "audio/ogg", name: "voice.ogg", bytes: 33 },
      { type: "document", ref: "d", mimeType: "application/pdf", name: "a.pdf", bytes: 5 },
    ]);
    expect(normalizeTelegram(78, { message_id: 6, chat: { id: 42, type: "private" } }, bot)).toBeUndefined();
  });
});

describe("stored files", () => {
  it("are named by their transcript and where they came from, and keyed under it", async () => {
    const id = await mediaIdOf("0b1c-sess", "run-1", 0, 1);
    expect(id).toMatch(/^0b1c-sess\.[0-9a-f]{24}$/);
    expect(await mediaIdOf("0b1c-sess", "run-1", 0, 1)).toBe(id);
    expect(await mediaIdOf("0b1c-sess", "run-1", 0, 2)).not.toBe(id);
    expect(mediaKey(id)).toBe(`sessions/0b1c-sess/${id}`);
    expect(mediaKey("../etc/passwd")).toBeUndefined();
    expect(mediaKey("x.abc")).toBeUndefined();
  });
});

describe("what a model is given of a message's files", () => {
  const message: TranscriptMessage = {
    id: "r:u0",
    role: "user",
    timestamp: 1,
    content: [
      { type: "text", text: "look" },
      { type: "image", mediaId: "s.1", mimeType: "image/png", bytes: 2048, name: "a.png" },
      { type: "file", mediaId: "s.2", mimeType: "text/plain", bytes: 10, name: "n.txt" },
      { type: "file", mediaId: "s.3", mimeType: "application/pdf", bytes: 3 * 1024 * 1024, name: "b.pdf" },
      { type: "audio", mediaId: "s.4", mimeType: "audio/ogg", bytes: 10, transcript: "hi" },
    ],
  };

  it("an image as input and a text file inline when loaded, a line naming the rest; audio is already text", () => {
    const image = new Uint8Array([1, 2, 3]);
    const [user] = toModelMessages([message], 10, {
      images: new Map([["s.1", { data: image, mediaType: "image/png" }]]),
      texts: new Map([["s.2", "notes"]]),
    });
    expect(user).toEqual({
      role: "user",
      content: [
        { type: "text", text: "look" },
        { type: "image", image, mediaType: "image/png" },
        { type: "text", text: "[file: n.txt, text/plain, 1 KB]\nnotes" },
        { type: "text", text: "[file: b.pdf, application/pdf, 3.0 MB]" },
      ],
    });
  });

  it("a model that cannot see reads the image as a line; a message without files stays text", () => {
    const [user] = toModelMessages([message], 10);
    expect((user?.content as Array<{ text?: string }> | undefined)?.[1]).toEqual({
      type: "text",
      text: "[image: a.png, image/png, 2 KB]",
    });
    const [plain] = toModelMessages(
      [{ id: "x", role: "user", timestamp: 1, content: [{ type: "text", text: "hi" }] }],
      10,
    );
    expect(plain).toEqual({ role: "user", content: "hi" });
    expect(mediaLine({ type: "audio", mediaId: "m", mimeType: "audio/ogg", bytes: 1 })).toBe(
      "[audio: m, audio/ogg, 1 KB]",
    );
  });
});
