import { describe, expect, it } from "vitest";
import { ConnectorSchema, type WhatsAppConfig } from "../../src/config/connectors";
import { ONLY_TEXT_NOTICE, SIGNATURE, whatsapp } from "../../src/connectors/whatsapp";
import { whatsappRequest } from "../support/platform-requests";

const number = ConnectorSchema.parse({
  type: "whatsapp",
  appSecretEnv: "WA_APP_SECRET",
  verifyTokenEnv: "WA_VERIFY",
  accessTokenEnv: "WA_TOKEN",
  phoneNumberId: "106540352242922",
}) as WhatsAppConfig;
const secrets = { WA_APP_SECRET: "app-secret-0123", WA_VERIFY: "verify-me-please", WA_TOKEN: "EAAG-token" };

/** Meta's signature of `raw` (test/support/platform-requests.ts signs as Meta does). */
async function metaSignature(secret: string, raw: string): Promise<string> {
  return (await whatsappRequest(JSON.parse(raw), secret)).headers[SIGNATURE] ?? "";
}

// A notification as the Cloud API documents it.
function notification(messages: unknown[], extra: Record<string, unknown> = {}) {
  return {
    object: "whatsapp_business_account",
    entry: [
      {
        id: "WABA-1",
        changes: [
          {
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: { display_phone_number: "15550001111", phone_number_id: "106540352242922" },
              contacts: [{ profile: { name: "Kerry" }, wa_id: "16315551181" }],
              messages,
              ...extra,
            },
          },
        ],
      },
    ],
  };
}

const text = {
  from: "16315551181",
  id: "wamid.ABGGFlA5Fpa",
  timestamp: "1700000000",
  type: "text",
  text: { body: "this is a text message" },
};

describe("WhatsApp: the subscription handshake", () => {
  it("answers the challenge when the verify token matches, 403 otherwise", () => {
    const url = (token: string) =>
      new URL(
        `https://gw.test/connectors/wa?hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=1158201444`,
      );
    expect(whatsapp.handshake?.(url("verify-me-please"), number, secrets)).toEqual({
      status: 200,
      body: "1158201444",
    });
    expect(whatsapp.handshake?.(url("nope"), number, secrets)?.status).toBe(403);
  });
});

describe("WhatsApp: verification", () => {
  it("accepts X-Hub-Signature-256 over the raw body with the app secret, and nothing else", async () => {
    const raw = JSON.stringify(notification([text]));
    const req = (sig: string) => ({
      url: new URL("https://gw.test/"),
      headers: new Headers({ [SIGNATURE]: sig }),
      raw,
      now: Date.now(),
    });
    expect(
      await whatsapp.verify(req(await metaSignature(secrets.WA_APP_SECRET, raw)), number, secrets),
    ).toEqual({ ok: true });
    expect(await whatsapp.verify(req(await metaSignature("wrong", raw)), number, secrets)).toMatchObject({
      ok: false,
    });
    expect(await whatsapp.verify(req("md5=abc"), number, secrets)).toMatchObject({ ok: false });
  });
});

describe("WhatsApp: notifications to SPEC §4 messages", () => {
  it("a text message is a direct message of its sender", () => {
    expect(whatsapp.receive(notification([text]), number)).toEqual({
      answer: { status: 200 },
      messages: [
        {
          inbound: {
            messageId: "wamid.ABGGFlA5Fpa",
            chatType: "direct",
            from: "16315551181",
            to: "15550001111",
            text: "this is a text message",
            senderName: "Kerry",
            timestamp: 1_700_000_000_000,
          },
          mentioned: false,
          replyTo: "wamid.ABGGFlA5Fpa",
        },
      ],
      notices: [],
    });
  });

  it("statuses are acknowledged and ignored; a sticker or a location gets the notice of what is understood", () => {
    const statuses = whatsapp.receive(
      notification([], {
        statuses: [{ id: "wamid.X", status: "delivered", recipient_id: "1", timestamp: "1" }],
      }),
      number,
    );
    expect(statuses).toEqual({ answer: { status: 200 }, messages: [], notices: [] });
    const sticker = whatsapp.receive(
      notification([{ from: "16315551181", id: "wamid.S", type: "sticker", sticker: { id: "s1" } }]),
      number,
    );
    expect(sticker.messages).toEqual([]);
    expect(sticker.notices).toEqual([{ to: "16315551181", text: ONLY_TEXT_NOTICE }]);
  });

  it("an image, a voice note and a document are messages whose file the run fetches by media id", () => {
    const got = whatsapp.receive(
      notification([
        {
          from: "16315551181",
          id: "wamid.I",
          type: "image",
          image: { id: "m1", mime_type: "image/jpeg", caption: "look" },
        },
        {
          from: "16315551181",
          id: "wamid.V",
          type: "audio",
          audio: { id: "m2", mime_type: "audio/ogg; codecs=opus", voice: true },
        },
        {
          from: "16315551181",
          id: "wamid.D",
          type: "document",
          document: { id: "m3", mime_type: "application/pdf", filename: "report.pdf" },
        },
      ]),
      number,
    );
    expect(got.notices).toEqual([]);
    expect(got.messages.map((m) => [m.inbound.text, m.inbound.attachments])).toEqual([
      ["look", [{ type: "image", ref: "m1", mimeType: "image/jpeg", name: "photo.jpg" }]],
      ["", [{ type: "voice", ref: "m2", mimeType: "audio/ogg; codecs=opus", name: "voice.ogg" }]],
      ["", [{ type: "document", ref: "m3", mimeType: "application/pdf", name: "report.pdf" }]],
    ]);
  });

  it("ignores messages to another number of the same app", () => {
    const other = notification([text]);
    const value = other.entry[0]?.changes[0]?.value as { metadata: { phone_number_id: string } };
    value.metadata.phone_number_id = "999999";
    expect(whatsapp.receive(other, number).messages).toEqual([]);
  });
});
