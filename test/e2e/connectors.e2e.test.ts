/**
 * The platform connectors end to end against `wrangler dev` (SPEC §18): for each of Telegram,
 * Slack, Discord and WhatsApp, a conversation of two messages signed exactly as the platform
 * signs them, answered through a fake of the platform's API on 127.0.0.1; the platform's retry
 * of the same event runs nothing twice; the platform's API failing for a while and then
 * recovering loses nothing and doubles nothing; a stranger on a pairing connector gets one
 * notice until an operator approves them; and Discord DMs outside an interaction are posted in
 * the DM channel, opened first when only the user is known.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakePlatform } from "../support/platform-fakes.ts";
import {
  discordCommand,
  discordRequest,
  type SignedRequest,
  slackEvent,
  slackRequest,
  telegramRequest,
  telegramUpdate,
  whatsappNotification,
  whatsappRequest,
} from "../support/platform-requests.ts";
import {
  APP_ID,
  PHONE,
  platformConnectors,
  platformFakes,
  telegramBot,
  PLATFORM_SECRETS as VARS,
} from "../support/platform-world.ts";
import { type Gateway, settled, startGateway, waitFor } from "./support/gateway.ts";
import { type PlatformServer, startPlatformServer } from "./support/platform-server.ts";

let gw: Gateway;
let server: PlatformServer;
const { telegram, slack, discord, whatsapp } = platformFakes();
/** A Discord user a scheduled job writes to in their DMs (`user:<id>`). */
const DIGEST_USER = "1600000000000000043";
const MIN = 60_000;

beforeAll(async () => {
  server = await startPlatformServer({
    "/telegram": telegram,
    "/slack": slack,
    "/discord": discord,
    "/graph": whatsapp,
  });
  const base = (p: string) => server.base(p === "whatsapp" ? "/graph" : `/${p}`);
  gw = await startGateway({
    config: {
      session: { dmScope: "per-channel-peer" },
      // The default 8 attempts with a shorter backoff (that the default backoff outlasts a
      // minute's outage is test/unit/delivery-backoff); a platform's retry-after is its own.
      delivery: { baseDelayMs: 250 },
      connectors: { ...platformConnectors(base), tgpair: telegramBot(base("telegram")) },
      cron: {
        jobs: [
          {
            id: "e2e-dm-digest",
            schedule: "* * * * *",
            message: "digest",
            deliver: { channel: "discord", to: `user:${DIGEST_USER}` },
          },
        ],
      },
    },
    vars: VARS,
  });
});

afterAll(async () => {
  await gw?.dispose();
  await server?.close();
});

async function post(channel: string, req: SignedRequest, extra: Record<string, string> = {}) {
  const res = await gw.fetch(`/connectors/${channel}`, {
    method: "POST",
    headers: { ...req.headers, ...extra },
    body: req.body,
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

async function historyOf(key: string): Promise<string[]> {
  const h = await gw.call<{ messages: Array<{ role: string; content: Array<{ text?: string }> }> }>(
    "chat.history",
    {
      sessionKey: key,
    },
  );
  return h.messages.map((m) => `${m.role}:${m.content[0]?.text ?? ""}`);
}

/** Waits for `n` messages posted by the fake for session `key`, then checks no more follow. */
async function postedExactly(fake: FakePlatform, key: string, n: number) {
  await waitFor(() => fake.posted().length >= n, 30_000, { what: `${n} posts to ${fake.name}` });
  // A duplicate would be queued, running or owed by the session until it was posted.
  await settled(gw, key);
  expect(fake.posted()).toHaveLength(n);
  return fake.posted();
}

async function deliveredOnce(key: string, n: number) {
  const list = await waitFor(
    async () => {
      const page = await gw.call<{ deliveries: Array<{ status: string; attempts: number }> }>(
        "deliveries.list",
        {
          sessionKey: key,
        },
      );
      return page.deliveries.length >= n && page.deliveries.every((d) => d.status === "delivered")
        ? page
        : undefined;
    },
    60_000,
    { what: `${n} deliveries of ${key} delivered` },
  );
  expect(list.deliveries).toHaveLength(n);
  return list.deliveries;
}

describe("Telegram", () => {
  it("a conversation of two messages; a retried update runs once; 429 then 500s lose nothing", async () => {
    const key = "agent:main:telegram:dm:31337";
    const first = telegramUpdate({ from: 31337, text: "hello from telegram" });
    expect(await post("telegram", telegramRequest(first, VARS.TELEGRAM_WEBHOOK_SECRET))).toMatchObject({
      status: 200,
    });
    expect((await post("telegram", telegramRequest(first, VARS.TELEGRAM_WEBHOOK_SECRET))).status).toBe(200);
    await postedExactly(telegram, key, 1);
    telegram.fail(429, 1, 1);
    telegram.fail(500, 3);
    await post(
      "telegram",
      telegramRequest(telegramUpdate({ from: 31337, text: "and again" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    const posts = await postedExactly(telegram, key, 2);
    expect(posts.map((p) => [p.body.chat_id, p.body.text])).toEqual([
      ["31337", "echo: hello from telegram"],
      ["31337", "echo: and again"],
    ]);
    expect(await historyOf(key)).toEqual([
      "user:hello from telegram",
      "assistant:echo: hello from telegram",
      "user:and again",
      "assistant:echo: and again",
    ]);
    const deliveries = await deliveredOnce(key, 2);
    expect(Math.max(...deliveries.map((d) => d.attempts))).toBe(5);
    expect((await post("telegram", telegramRequest(first, "wrong-secret"))).status).toBe(401);
  });

  it("pairing: a stranger gets one notice, no run, until approved", async () => {
    const stranger = 4040;
    const before = telegram.posted().length;
    await post(
      "tgpair",
      telegramRequest(telegramUpdate({ from: stranger, text: "hi" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await post(
      "tgpair",
      telegramRequest(telegramUpdate({ from: stranger, text: "hello?" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await waitFor(() => telegram.posted().length > before, 15_000, { what: "the pairing notice" });
    await new Promise((r) => setTimeout(r, 500));
    const notices = telegram.posted().slice(before);
    expect(notices).toHaveLength(1);
    const code = /code is ([A-Z0-9]{8})/.exec(String(notices[0]?.body.text))?.[1] as string;
    expect((await gw.rpc("sessions.get", { key: `agent:main:tgpair:dm:${stranger}` })).status).toBe(404);
    expect(await gw.call("pairing.approve", { channel: "tgpair", code })).toMatchObject({
      peerId: String(stranger),
    });
    await post(
      "tgpair",
      telegramRequest(telegramUpdate({ from: stranger, text: "now?" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await waitFor(() => telegram.posted().length === before + 2, 15_000, {
      what: "the reply after approval",
    });
    expect(telegram.posted().at(-1)?.body.text).toBe("echo: now?");
    const status = await gw.call<{ access: { refused: Record<string, Record<string, number>> } }>("status");
    expect(status.access.refused.tgpair?.pairing).toBe(2);
  });
});

describe("a platform API answering 429 and then 500 until it recovers", () => {
  // The platform is down for four attempts (its 429's 5 s waited out, then backoff), then back.
  it("loses nothing and doubles nothing: the reply is delivered once when it recovers", async () => {
    const key = "agent:main:telegram:dm:60060";
    const before = telegram.posted().length;
    telegram.fail(429, 1, 5);
    telegram.breakDown(500);
    await post(
      "telegram",
      telegramRequest(
        telegramUpdate({ from: 60060, text: "are you still there?" }),
        VARS.TELEGRAM_WEBHOOK_SECRET,
      ),
    );
    const failed = () =>
      telegram.calls.filter((c) => c.path.endsWith("/sendMessage") && c.body.chat_id === "60060").length;
    await waitFor(() => failed() >= 4, 60_000, { intervalMs: 100, what: "four failed attempts" });
    expect(telegram.posted().length).toBe(before);
    telegram.recover();
    const [delivery] = await deliveredOnce(key, 1);
    expect(delivery?.attempts).toBe(5);
    const posts = telegram.posted().slice(before);
    expect(posts.map((p) => p.body.text)).toEqual(["echo: are you still there?"]);
    const attempts = telegram.calls.filter(
      (c) => c.path.endsWith("/sendMessage") && c.body.chat_id === "60060",
    );
    expect(attempts[0]?.status).toBe(429);
    // The 429's 5 s were waited out before the next attempt.
    expect(attempts.length).toBe(delivery?.attempts);
  }, 180_000);
});

describe("Slack", () => {
  it("a conversation in a thread; a retry (X-Slack-Retry-Num) runs once; 500s then recovery lose nothing", async () => {
    const threadTs = "1700000000.000100";
    const key = `agent:main:slack:channel:c0e2e:thread:${threadTs}`;
    const first = slackEvent({
      user: "U1",
      channel: "C0E2E",
      channelType: "channel",
      text: "<@U0BOT> first",
      threadTs,
    });
    expect((await post("slack", await slackRequest(first, VARS.SLACK_SIGNING_SECRET))).status).toBe(200);
    expect(
      (
        await post("slack", await slackRequest(first, VARS.SLACK_SIGNING_SECRET), {
          "x-slack-retry-num": "1",
          "x-slack-retry-reason": "http_timeout",
        })
      ).status,
    ).toBe(200);
    await postedExactly(slack, key, 1);
    slack.breakDown(500);
    await post(
      "slack",
      await slackRequest(
        slackEvent({
          user: "U1",
          channel: "C0E2E",
          channelType: "channel",
          text: "<@U0BOT> second",
          threadTs,
        }),
        VARS.SLACK_SIGNING_SECRET,
      ),
    );
    await waitFor(() => slack.calls.filter((c) => c.status === 500).length >= 2, 20_000, {
      what: "two failed posts",
    });
    slack.recover();
    const posts = await postedExactly(slack, key, 2);
    expect(posts.map((p) => p.body)).toEqual([
      { channel: "C0E2E", text: "echo: <@U0BOT> first", thread_ts: threadTs },
      { channel: "C0E2E", text: "echo: <@U0BOT> second", thread_ts: threadTs },
    ]);
    expect(await historyOf(key)).toHaveLength(4);
    await deliveredOnce(key, 2);
  });
});

describe("Discord", () => {
  it("a conversation by slash command: deferred, then the original response edited; a retried interaction runs once; a 429 is waited out", async () => {
    const key = "agent:main:discord:channel:1300000000000000042";
    const at = {
      applicationId: APP_ID,
      user: "1500000000000000042",
      channelId: "1300000000000000042",
      guildId: "1400000000000000042",
    };
    const first = discordCommand({ ...at, text: "first question" });
    expect(await post("discord", await discordRequest(first))).toMatchObject({
      status: 200,
      json: { type: 5 },
    });
    expect(await post("discord", await discordRequest(first))).toMatchObject({
      status: 200,
      json: { type: 5 },
    });
    await postedExactly(discord, key, 1);
    discord.fail(429, 1, 1);
    discord.fail(500, 2);
    const second = discordCommand({ ...at, text: "second question" });
    await post("discord", await discordRequest(second));
    const posts = await postedExactly(discord, key, 2);
    expect(posts.map((p) => [p.method, p.path, p.body.content])).toEqual([
      ["PATCH", `/webhooks/${APP_ID}/${first.token}/messages/@original`, "echo: first question"],
      ["PATCH", `/webhooks/${APP_ID}/${second.token}/messages/@original`, "echo: second question"],
    ]);
    expect(await historyOf(key)).toHaveLength(4);
    await deliveredOnce(key, 2);
  });

  it("a DM outside an interaction: a reply on a DM session's route goes to its DM channel; a job's output to user:<id> opens the DM first", async () => {
    const user = "1600000000000000042";
    const dmChannel = "1700000000000000042";
    discord.addUser(user, { dmChannelId: dmChannel });
    const digest = discord.addUser(DIGEST_USER);
    const key = `agent:main:discord:dm:${user}`;
    const from = discord.calls.length;
    await post(
      "discord",
      await discordRequest(
        discordCommand({ applicationId: APP_ID, user, text: "hello", channelId: dmChannel }),
      ),
    );
    await deliveredOnce(key, 1);
    // The operator's message on the session's route: no interaction to answer through.
    await gw.call("chat.send", { sessionKey: key, message: "are you there?", deliver: true });
    await deliveredOnce(key, 2);
    // The job's minute, as Cloudflare's trigger fires it (far from the real clock's minutes).
    const minute = Math.ceil(Date.now() / MIN) * MIN + 30 * MIN;
    const res = await gw.fetch(
      `/cdn-cgi/local/scheduled?cron=${encodeURIComponent("* * * * *")}&time=${minute}`,
    );
    expect(res.status).toBe(200);
    await res.text();
    const [job] = await deliveredOnce("cron:e2e-dm-digest", 1);
    expect(job).toMatchObject({ to: `user:${DIGEST_USER}`, attempts: 1 });

    const calls = discord.calls.slice(from).map((c) => [c.method, c.path, c.status, c.body.content]);
    expect(calls).toEqual([
      ["PATCH", expect.stringMatching(/\/messages\/@original$/), 200, "echo: hello"],
      ["POST", `/channels/${dmChannel}/messages`, 200, "echo: are you there?"],
      ["POST", "/users/@me/channels", 200, undefined],
      ["POST", `/channels/${digest.dmChannelId}/messages`, 200, "echo: digest"],
    ]);
    expect(discord.calls.slice(from).find((c) => c.path === "/users/@me/channels")?.body).toEqual({
      recipient_id: DIGEST_USER,
    });
  });
});

describe("WhatsApp", () => {
  it("the handshake, then a conversation; a redelivered message runs once; 500s then recovery lose nothing", async () => {
    const challenge = await gw.fetch(
      `/connectors/whatsapp?hub.mode=subscribe&hub.verify_token=${VARS.WHATSAPP_VERIFY_TOKEN}&hub.challenge=777`,
    );
    expect([challenge.status, await challenge.text()]).toEqual([200, "777"]);
    const key = "agent:main:whatsapp:dm:15550002222";
    const first = whatsappNotification({ phoneNumberId: PHONE, from: "15550002222", text: "hola" });
    expect((await post("whatsapp", await whatsappRequest(first, VARS.WHATSAPP_APP_SECRET))).status).toBe(200);
    expect((await post("whatsapp", await whatsappRequest(first, VARS.WHATSAPP_APP_SECRET))).status).toBe(200);
    await postedExactly(whatsapp, key, 1);
    whatsapp.fail(500, 3);
    await post(
      "whatsapp",
      await whatsappRequest(
        whatsappNotification({ phoneNumberId: PHONE, from: "15550002222", text: "otra vez" }),
        VARS.WHATSAPP_APP_SECRET,
      ),
    );
    const posts = await postedExactly(whatsapp, key, 2);
    expect(posts.map((p) => (p.body.text as { body: string }).body)).toEqual([
      "echo: hola",
      "echo: otra vez",
    ]);
    expect(await historyOf(key)).toHaveLength(4);
    await deliveredOnce(key, 2);
  });
});
