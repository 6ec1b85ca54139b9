import { beforeAll, describe, expect, it } from "vitest";
import { ConnectorSchema, type DiscordConfig } from "../../src/config/connectors";
import { discord, SIGNATURE, TIMESTAMP } from "../../src/connectors/discord";

const hex = (b: ArrayBuffer | Uint8Array) =>
  [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

let keys: CryptoKeyPair;
let app: DiscordConfig;

beforeAll(async () => {
  // A real Ed25519 key pair, as the Developer Portal gives an application.
  keys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const publicKey = hex((await crypto.subtle.exportKey("raw", keys.publicKey)) as ArrayBuffer);
  app = ConnectorSchema.parse({
    type: "discord",
    publicKey,
    applicationId: "1100000000000000001",
  }) as DiscordConfig;
});

/** Discord's request signature: Ed25519 over the timestamp followed by the raw body. */
async function signed(body: unknown, opts: { key?: CryptoKey; tamper?: boolean } = {}) {
  const raw = JSON.stringify(body);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = await crypto.subtle.sign(
    { name: "Ed25519" },
    opts.key ?? keys.privateKey,
    new TextEncoder().encode(ts + raw),
  );
  return {
    url: new URL("https://gw.test/connectors/discord"),
    headers: new Headers({ [SIGNATURE]: hex(sig), [TIMESTAMP]: ts }),
    raw: opts.tamper ? raw.replace("}", ',"x":1}') : raw,
    now: Date.now(),
  };
}

function command(extra: Record<string, unknown>, text: unknown = "what's up?") {
  return {
    id: "1200000000000000001",
    application_id: "1100000000000000001",
    type: 2,
    token: "interaction-token-abc",
    channel_id: "1300000000000000001",
    data: { id: "1", name: "ask", type: 1, options: [{ name: "message", type: 3, value: text }] },
    ...extra,
  };
}

describe("Discord: verification", () => {
  it("accepts Ed25519 over timestamp + raw body with the application's key, and nothing else", async () => {
    expect(await discord.verify(await signed({ id: "1", type: 1 }), app, {})).toEqual({ ok: true });
    const other = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
      "sign",
      "verify",
    ])) as CryptoKeyPair;
    expect(
      await discord.verify(await signed({ id: "1", type: 1 }, { key: other.privateKey }), app, {}),
    ).toMatchObject({ ok: false });
    expect(await discord.verify(await signed({ id: "1", type: 1 }, { tamper: true }), app, {})).toMatchObject(
      { ok: false },
    );
    const req = await signed({ id: "1", type: 1 });
    req.headers.set(SIGNATURE, "zz");
    expect(await discord.verify(req, app, {})).toMatchObject({ ok: false });
  });
});

describe("Discord: interactions", () => {
  it("answers PING with PONG", () => {
    expect(discord.receive({ id: "1", type: 1 }, app)).toEqual({
      answer: { status: 200, body: { type: 1 } },
      messages: [],
    });
  });

  it("a command in a guild is a channel message, deferred; the token goes in the reply context", () => {
    const got = discord.receive(
      command({
        guild_id: "1400000000000000001",
        member: { user: { id: "1500000000000000001", username: "ann", global_name: "Ann" } },
      }),
      app,
    );
    expect(got.answer).toEqual({ status: 200, body: { type: 5 } });
    expect(got.messages[0]).toMatchObject({
      inbound: {
        messageId: "1200000000000000001",
        chatType: "channel",
        from: "1500000000000000001",
        groupId: "1300000000000000001",
        groupSpace: "1400000000000000001",
        text: "what's up?",
        senderName: "Ann",
      },
      mentioned: true,
    });
    expect(JSON.parse(got.messages[0]?.replyContext ?? "{}")).toMatchObject({
      token: "interaction-token-abc",
      channelId: "1300000000000000001",
      at: expect.any(Number),
    });
  });

  it("a command in a DM is a direct message from the user", () => {
    const got = discord.receive(command({ user: { id: "1600000000000000001", username: "bo" } }), app);
    expect(got.messages[0]?.inbound).toMatchObject({ chatType: "direct", from: "1600000000000000001" });
    expect(got.messages[0]?.inbound.groupId).toBeUndefined();
  });

  it("another command, an empty message or another interaction type is answered, not run", () => {
    const other = discord.receive(
      { ...command({ user: { id: "1" } }), data: { name: "other", options: [] } },
      app,
    );
    expect(other.messages).toEqual([]);
    expect(other.answer.body).toMatchObject({ type: 4, data: { flags: 64 } });
    expect(discord.receive(command({ user: { id: "1" } }, " "), app).messages).toEqual([]);
    expect(discord.receive({ id: "2", type: 3, token: "t" }, app).messages).toEqual([]);
  });
});
