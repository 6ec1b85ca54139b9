/**
 * The Discord connector on its own (SPEC §18): its Ed25519 verification, its normalizer on
 * Discord's documented interactions (and where a chat's posts go outside one), the addresses a
 * delivery's `to` may hold, and its sender against the Discord fake: a DM opened with the bot
 * token, a retry that posts no part twice, Discord's errors classified.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ConnectorSchema, type DiscordConfig } from "../../src/config/connectors";
import { addressOf, discord, SIGNATURE, TIMESTAMP } from "../../src/connectors/discord";
import { fakeDiscord } from "../support/platform-fakes";

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

  it("a command in a DM is a direct message from the user, posted to outside it in the DM's channel", () => {
    const got = discord.receive(
      command({ context: 1, user: { id: "1600000000000000001", username: "bo" } }),
      app,
    );
    expect(got.messages[0]?.inbound).toMatchObject({ chatType: "direct", from: "1600000000000000001" });
    expect(got.messages[0]?.inbound.groupId).toBeUndefined();
    // The channel of a command in the bot's DM is the bot's DM channel with the user.
    expect(got.messages[0]?.postTo).toBe("1300000000000000001");
  });

  it("in a private channel of the user's own (a user-installed app), posts go to the bot's DM with the user", () => {
    const got = discord.receive(command({ context: 2, user: { id: "1600000000000000001" } }), app);
    expect(got.messages[0]?.inbound).toMatchObject({ chatType: "direct", from: "1600000000000000001" });
    expect(got.messages[0]?.postTo).toBe("user:1600000000000000001");
  });

  it("a guild channel's posts go to its own id (no postTo)", () => {
    const got = discord.receive(
      command({ guild_id: "1400000000000000001", member: { user: { id: "1500000000000000001" } } }),
      app,
    );
    expect(got.messages[0]?.postTo).toBeUndefined();
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

describe("Discord: addresses", () => {
  it("user:<id> is a user; channel:<id> and a bare id are channels", () => {
    expect(addressOf("user:1600000000000000001")).toEqual({ kind: "user", id: "1600000000000000001" });
    expect(addressOf("channel:1300000000000000001")).toEqual({ kind: "channel", id: "1300000000000000001" });
    expect(addressOf("1300000000000000001")).toEqual({ kind: "channel", id: "1300000000000000001" });
  });
});

describe("Discord: posting to a user outside an interaction", () => {
  const BASE = "https://discord.test/api/v10";
  const TOKEN = "bot-token";
  const user = "1600000000000000009";
  let fake: ReturnType<typeof fakeDiscord>;
  let account: DiscordConfig;

  beforeAll(() => {
    account = { ...app, apiBaseUrl: BASE, botTokenEnv: "DISCORD_BOT_TOKEN" };
  });

  afterEach(() => vi.restoreAllMocks());

  function withFake() {
    fake = fakeDiscord(account.applicationId, TOKEN);
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) =>
      fake.handle(new Request(input, init), BASE),
    );
    return fake;
  }

  const text = `${"a".repeat(1990)}\n${"b".repeat(1990)}`;
  const secrets = { DISCORD_BOT_TOKEN: TOKEN };

  it("a retry goes on from the part that failed: the DM is opened again, no part is posted twice", async () => {
    const { dmChannelId } = withFake().addUser(user);
    const progress: number[] = [];
    const first = await discord.send({ to: `user:${user}`, text, partsSent: 0 }, account, secrets, (n) => {
      progress.push(n);
      // Discord fails the next post: the second part.
      fake.fail(500, 1);
    });
    expect(first).toMatchObject({
      ok: false,
      partsSent: 1,
      error: "Discord (DM channel) answered 500: 500: Internal Server Error",
    });
    expect(first).not.toHaveProperty("permanent");
    expect(progress).toEqual([1]);

    const retry = await discord.send({ to: `user:${user}`, text, partsSent: 1 }, account, secrets, () => {});
    expect(retry).toEqual({ ok: true });
    expect(fake.calls.map((c) => [c.path, c.status])).toEqual([
      ["/users/@me/channels", 200],
      [`/channels/${dmChannelId}/messages`, 200],
      [`/channels/${dmChannelId}/messages`, 500],
      ["/users/@me/channels", 200],
      [`/channels/${dmChannelId}/messages`, 200],
    ]);
    expect(fake.posted().map((c) => String(c.body.content)[0])).toEqual(["a", "b"]);
  });

  it("once the interaction token has expired, a reply to user:<id> opens the DM rather than the interaction's channel", async () => {
    const { dmChannelId } = withFake().addUser(user);
    const replyContext = JSON.stringify({
      token: "t",
      at: Date.now() - 20 * 60_000,
      channelId: "1300000000000000005",
    });
    expect(
      await discord.send(
        { to: `user:${user}`, text: "late", partsSent: 0, replyContext },
        account,
        secrets,
        () => {},
      ),
    ).toEqual({ ok: true });
    expect(fake.posted()).toEqual([expect.objectContaining({ path: `/channels/${dmChannelId}/messages` })]);
  });

  it("Discord's 429 on opening the DM is retried after its wait", async () => {
    withFake();
    vi.mocked(globalThis.fetch).mockResolvedValueOnce(
      new Response(
        JSON.stringify({ message: "You are being rate limited.", retry_after: 2.5, global: false }),
        {
          status: 429,
        },
      ),
    );
    expect(
      await discord.send({ to: `user:${user}`, text: "x", partsSent: 0 }, account, secrets, () => {}),
    ).toEqual({
      ok: false,
      error: `Discord (opening the DM with user ${user}) answered 429: You are being rate limited.`,
      retryAfterMs: 2500,
      partsSent: 0,
    });
  });

  it("without a bot token nothing is called, and the error names botTokenEnv", async () => {
    withFake();
    const result = await discord.send({ to: `user:${user}`, text: "x", partsSent: 0 }, account, {}, () => {});
    expect(result).toMatchObject({ ok: false, permanent: true, partsSent: 0 });
    expect(result.ok === false && result.error).toContain("DISCORD_BOT_TOKEN (botTokenEnv) is not set");
    const unnamed = await discord.send({ to: `user:${user}`, text: "x", partsSent: 0 }, app, {}, () => {});
    expect(unnamed.ok === false && unnamed.error).toContain("no botTokenEnv is configured");
    expect(fake.calls).toEqual([]);
  });
});
