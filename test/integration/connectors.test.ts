/**
 * The platform connectors in workerd (SPEC §18): each platform's signed webhook through the one
 * inbound pipeline to a reply posted through the platform's API (fakes written from the
 * platforms' documentation, test/support/platform-fakes.ts), with its session key, its thread or
 * topic, dedupe of the platform's retries, access rules (pairing, requireMention), long replies
 * split at the platform's limit, the platform's failures classified, and Discord's posts outside
 * an interaction (announcements, notices, job output) in DM channels, never to a user's id.
 */
import { createExecutionContext, runDurableObjectAlarm, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config/load";
import { runDueJobs } from "../../src/cron/jobs";
import { app } from "../../src/http/app";
import type { Announcement } from "../../src/session/flows/handoff";
import type { FakePlatform, fakeDiscord } from "../support/platform-fakes";
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
} from "../support/platform-requests";
import {
  APP_ID,
  FAKE_BASES,
  PHONE,
  PLATFORM_SECRETS,
  platformConnectors,
  platformFakes,
  telegramBot,
} from "../support/platform-world";
import {
  actor,
  changeActorEnv,
  configText,
  drain,
  eventually,
  holdClock,
  nextAttempt,
  outboxOf,
  TOKEN,
} from "./support";

const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const VARS = PLATFORM_SECRETS;
const BASES = FAKE_BASES;
const CONFIG = {
  ...TEST_CONFIG,
  session: { dmScope: "per-channel-peer" },
  delivery: { maxAttempts: 8, baseDelayMs: 20, maxDelayMs: 100 },
  commands: { owners: ["tgp:1"] },
  connectors: {
    ...(TEST_CONFIG.connectors as object),
    ...platformConnectors((p) => BASES[p]),
    // A Telegram bot with the default access: pairing.
    tgp: telegramBot(BASES.telegram),
  },
};
const ENV = { ...env, ...VARS, SWITCHBOARD_CONFIG: configText(CONFIG) } as Env;

let telegram: FakePlatform;
let slack: FakePlatform;
let discord: ReturnType<typeof fakeDiscord>;
let whatsapp: FakePlatform;

beforeEach(() => {
  ({ telegram, slack, discord, whatsapp } = platformFakes());
  const fakes: Array<[string, FakePlatform]> = [
    [BASES.telegram, telegram],
    [BASES.slack, slack],
    [BASES.discord, discord],
    [BASES.whatsapp, whatsapp],
  ];
  const real = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const req = new Request(input, init);
    const fake = fakes.find(([base]) => req.url.startsWith(base));
    return fake ? fake[1].handle(req, fake[0]) : real(input, init);
  });
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/** The session's actor runs with this file's config and secrets (call before its first message). */
async function prepare(...keys: string[]) {
  for (const key of keys) await changeActorEnv(key, { config: CONFIG, vars: VARS });
}

async function post(path: string, req: SignedRequest, extra: Record<string, string> = {}) {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`http://gw.test${path}`, {
      method: "POST",
      headers: { ...req.headers, ...extra },
      body: req.body,
    }),
    ENV,
    ctx,
  );
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  return { status: res.status, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

async function rpc<T = Record<string, unknown>>(method: string, params: unknown = {}) {
  const res = await app.fetch(
    new Request(`http://gw.test/rpc/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(params),
    }),
    ENV,
    createExecutionContext(),
  );
  return {
    status: res.status,
    ...((await res.json()) as { ok: boolean; payload: T; error?: { code: string; message: string } }),
  };
}

const posted = (fake: FakePlatform) => fake.posted();

describe("Telegram", () => {
  it("answers a private message once, in its chat, under the documented key; the same update twice runs once", async () => {
    const key = "agent:main:telegram:dm:4242";
    await prepare(key);
    const update = telegramUpdate({ from: 4242, text: "hello bot" });
    const first = await post("/connectors/telegram", telegramRequest(update, VARS.TELEGRAM_WEBHOOK_SECRET));
    expect(first).toMatchObject({ status: 200, json: {} });
    await eventually(async () => posted(telegram).length === 1);
    const call = posted(telegram)[0]!;
    expect(call.path).toBe(`/bot${VARS.TELEGRAM_BOT_TOKEN}/sendMessage`);
    expect(call.body).toMatchObject({
      chat_id: "4242",
      text: "echo: hello bot",
      reply_parameters: { message_id: update.message.message_id },
    });
    // The typing indicator was shown while the run went on.
    expect(telegram.calls.some((c) => c.path.endsWith("/sendChatAction") && c.body.action === "typing")).toBe(
      true,
    );
    // Telegram retries an update it did not see acknowledged: same update_id, one run.
    expect(
      (await post("/connectors/telegram", telegramRequest(update, VARS.TELEGRAM_WEBHOOK_SECRET))).status,
    ).toBe(200);
    const history = await rpc<{ messages: unknown[] }>("chat.history", { sessionKey: key });
    expect(history.payload.messages).toHaveLength(2);
    await drain(key);
    expect(posted(telegram)).toHaveLength(1);
  });

  it("refuses a request without the secret token with 401 and stores nothing", async () => {
    const update = telegramUpdate({ from: 4343, text: "let me in" });
    const res = await post("/connectors/telegram", telegramRequest(update, "not-the-secret"));
    expect(res.status).toBe(401);
    expect((await rpc("sessions.get", { key: "agent:main:telegram:dm:4343" })).status).toBe(404);
    expect(telegram.calls).toHaveLength(0);
  });

  it("in a group, runs only what mentions the bot; a forum topic is the thread and the reply stays in it", async () => {
    const chat = { id: -1001234, type: "supergroup", title: "Team", is_forum: true };
    const topicKey = "agent:main:telegram:group:-1001234:topic:77";
    await prepare(topicKey, "agent:main:telegram:group:-1001234");
    const quiet = await post(
      "/connectors/telegram",
      telegramRequest(
        telegramUpdate({ from: 5, chat, threadId: 77, text: "just chatting" }),
        VARS.TELEGRAM_WEBHOOK_SECRET,
      ),
    );
    expect(quiet.status).toBe(200);
    const asked = await post(
      "/connectors/telegram",
      telegramRequest(
        telegramUpdate({ from: 5, chat, threadId: 77, text: "@helper_bot what time is it?" }),
        VARS.TELEGRAM_WEBHOOK_SECRET,
      ),
    );
    expect(asked.status).toBe(200);
    await eventually(async () => posted(telegram).length === 1);
    expect(posted(telegram)[0]!.body).toMatchObject({ chat_id: "-1001234", message_thread_id: 77 });
    const history = await rpc<{ messages: Array<{ content: Array<{ text: string }> }> }>("chat.history", {
      sessionKey: topicKey,
    });
    expect(history.payload.messages.map((m) => m.content[0]?.text)).toEqual([
      "@helper_bot what time is it?",
      "echo: @helper_bot what time is it?",
    ]);
    const status = await rpc<{ access: { refused: Record<string, Record<string, number>> } }>("status");
    expect(status.payload.access.refused.telegram?.mention).toBeGreaterThanOrEqual(1);
  });

  it("pairing: a stranger gets one notice with a code and no model call; once approved, the next message runs", async () => {
    const key = "agent:main:tgp:dm:9001";
    await prepare(key);
    await post(
      "/connectors/tgp",
      telegramRequest(telegramUpdate({ from: 9001, text: "hi?" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await post(
      "/connectors/tgp",
      telegramRequest(telegramUpdate({ from: 9001, text: "hello??" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    expect(posted(telegram)).toHaveLength(1);
    const notice = String(posted(telegram)[0]!.body.text);
    const code = /code is ([A-Z0-9]{8})/.exec(notice)?.[1];
    expect(code).toBeDefined();
    expect((await rpc("sessions.get", { key })).status).toBe(404);
    const listed = await rpc<{ pending: Array<{ code: string; peerId: string }> }>("pairing.list", {
      channel: "tgp",
    });
    expect(listed.payload.pending).toEqual([expect.objectContaining({ code, peerId: "9001" })]);
    expect(await rpc("pairing.approve", { channel: "tgp", code })).toMatchObject({
      status: 200,
      payload: { peerId: "9001" },
    });
    expect((await rpc("pairing.approve", { channel: "tgp", code })).status).toBe(404);
    await post(
      "/connectors/tgp",
      telegramRequest(telegramUpdate({ from: 9001, text: "now?" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await eventually(async () => posted(telegram).length === 2);
    expect(posted(telegram)[1]!.body.text).toBe("echo: now?");
    // Revoked, it is a stranger again (its old code was used: a new one is offered).
    expect(await rpc("pairing.revoke", { channel: "tgp", peerId: "9001" })).toMatchObject({
      payload: { revoked: true },
    });
    await post(
      "/connectors/tgp",
      telegramRequest(telegramUpdate({ from: 9001, text: "still?" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    await eventually(async () => posted(telegram).length === 3);
    expect(String(posted(telegram)[2]!.body.text)).toMatch(/pairing code/);
  });

  it("a reply of 10,000 characters arrives in order, each part within 4096", async () => {
    const key = "agent:main:telegram:dm:777";
    await prepare(key);
    const text = Array.from({ length: 1800 }, (_, i) => `word${i}`)
      .join(" ")
      .slice(0, 10_000);
    await post(
      "/connectors/telegram",
      telegramRequest(telegramUpdate({ from: 777, text }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    // What the chat shows: the first part is the reply's preview, edited into it.
    await eventually(async () => telegram.shown("777").length >= 3);
    const parts = telegram.shown("777");
    expect(parts.every((p) => p.length <= 4096)).toBe(true);
    expect(parts.join(" ").replace(/\s+/g, " ")).toBe(`echo: ${text}`.replace(/\s+/g, " "));
  });

  it("429 (retry_after) and then 500s lose nothing and double nothing", async () => {
    const key = "agent:main:telegram:dm:888";
    await prepare(key);
    const t0 = holdClock();
    telegram.fail(429, 1, 1);
    telegram.fail(500, 3);
    await post(
      "/connectors/telegram",
      telegramRequest(telegramUpdate({ from: 888, text: "through the storm" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    // The first attempt, with the run, met the 429: the next one waits out its retry_after (1 s).
    await eventually(async () => (await outboxOf(key))[0]?.attempts === 1);
    vi.setSystemTime(t0 + 999);
    await runDurableObjectAlarm(actor(key));
    expect(await outboxOf(key)).toEqual([expect.objectContaining({ attempts: 1, nextAt: t0 + 1000 })]);
    // Each attempt after it is made at the actor's alarm, once the clock is moved there: the
    // 500s back off 40, 80, then 100 ms (20 ms doubling, capped at 100).
    const attemptedAt: number[] = [];
    for (let i = 0; i < 4; i++) {
      const { before, at } = await nextAttempt(key);
      expect(at).toBe(before.nextAt);
      attemptedAt.push(at! - t0);
    }
    expect(attemptedAt).toEqual([1000, 1040, 1120, 1220]);
    await drain(key);
    const list = await rpc<{ deliveries: Array<{ status: string; attempts: number }> }>("deliveries.list", {
      sessionKey: key,
    });
    expect(list.payload.deliveries).toEqual([expect.objectContaining({ status: "delivered", attempts: 5 })]);
    expect(posted(telegram).map((c) => c.body.text)).toEqual(["echo: through the storm"]);
    const attempts = telegram.calls.filter((c) => c.path.endsWith("/sendMessage"));
    expect(attempts.map((c) => c.status)).toEqual([429, 500, 500, 500, 200]);
  });
});

describe("Slack", () => {
  it("answers url_verification with its challenge", async () => {
    const res = await post(
      "/connectors/slack",
      await slackRequest(
        { type: "url_verification", token: "t", challenge: "abc123" },
        VARS.SLACK_SIGNING_SECRET,
      ),
    );
    expect(res).toMatchObject({ status: 200, json: { challenge: "abc123" } });
  });

  it("a DM is answered with chat.postMessage and the bot token; a retry (X-Slack-Retry-Num) runs nothing twice", async () => {
    const key = "agent:main:slack:dm:u123";
    await prepare(key);
    const event = slackEvent({ user: "U123", channel: "D123", text: "hey" });
    const req = await slackRequest(event, VARS.SLACK_SIGNING_SECRET);
    expect((await post("/connectors/slack", req)).status).toBe(200);
    await eventually(async () => posted(slack).length === 1);
    expect(posted(slack)[0]).toMatchObject({
      path: "/chat.postMessage",
      headers: expect.objectContaining({ authorization: `Bearer ${VARS.SLACK_BOT_TOKEN}` }),
      body: { channel: "U123", text: "echo: hey" },
    });
    const retry = await slackRequest(event, VARS.SLACK_SIGNING_SECRET);
    expect(
      (
        await post("/connectors/slack", retry, {
          "x-slack-retry-num": "1",
          "x-slack-retry-reason": "http_timeout",
        })
      ).status,
    ).toBe(200);
    await drain(key);
    expect(posted(slack)).toHaveLength(1);
  });

  it("a badly signed event is 401 and leaves no trace", async () => {
    const req = await slackRequest(slackEvent({ user: "U404", channel: "D404", text: "x" }), "wrong-secret");
    expect((await post("/connectors/slack", req)).status).toBe(401);
    expect((await rpc("sessions.get", { key: "agent:main:slack:dm:u404" })).status).toBe(404);
  });

  it("in a channel, only a mention runs, and the reply stays in the thread; message + app_mention run once", async () => {
    const key = "agent:main:slack:channel:c777:thread:1700000000.000100";
    await prepare(key, "agent:main:slack:channel:c777");
    const chatter = slackEvent({
      user: "U1",
      channel: "C777",
      channelType: "channel",
      text: "lunch?",
      threadTs: "1700000000.000100",
    });
    await post("/connectors/slack", await slackRequest(chatter, VARS.SLACK_SIGNING_SECRET));
    const ts = "1700000100.000200";
    const text = "<@U0BOT> summarize the thread";
    for (const e of [
      slackEvent({
        user: "U1",
        channel: "C777",
        channelType: "channel",
        text,
        ts,
        threadTs: "1700000000.000100",
      }),
      slackEvent({
        type: "app_mention",
        user: "U1",
        channel: "C777",
        text,
        ts,
        threadTs: "1700000000.000100",
      }),
    ]) {
      expect((await post("/connectors/slack", await slackRequest(e, VARS.SLACK_SIGNING_SECRET))).status).toBe(
        200,
      );
    }
    await eventually(async () => posted(slack).length === 1);
    expect(posted(slack)[0]!.body).toEqual({
      channel: "C777",
      text: `echo: ${text}`,
      thread_ts: "1700000000.000100",
    });
    await drain(key);
    expect(posted(slack)).toHaveLength(1);
  });

  it("channel_not_found is dead at once with Slack's reason", async () => {
    const key = "agent:main:slack:channel:cgone";
    await prepare(key);
    const e = slackEvent({
      user: "U1",
      channel: "CGONE",
      channelType: "channel",
      text: "<@U0BOT> still there?",
    });
    await post("/connectors/slack", await slackRequest(e, VARS.SLACK_SIGNING_SECRET));
    const dead = await eventually(async () => {
      const list = await rpc<{ deliveries: Array<{ status: string; lastError?: string; attempts: number }> }>(
        "deliveries.list",
        { sessionKey: key },
      );
      return list.payload.deliveries.find((d) => d.status === "dead");
    });
    expect(dead).toMatchObject({ attempts: 1, lastError: expect.stringContaining("channel_not_found") });
  });
});

describe("Discord", () => {
  it("answers PING with PONG and refuses a bad signature with 401", async () => {
    expect(
      await post("/connectors/discord", await discordRequest({ id: "1", type: 1, application_id: APP_ID })),
    ).toMatchObject({
      status: 200,
      json: { type: 1 },
    });
    const req = await discordRequest({ id: "1", type: 1, application_id: APP_ID });
    const tampered = { ...req, body: req.body.replace("}", ',"extra":1}') };
    expect((await post("/connectors/discord", tampered)).status).toBe(401);
  });

  it("a slash command is deferred at once, and the reply edits the original response, further parts following it", async () => {
    const key = "agent:main:discord:channel:1300000000000000077";
    await prepare(key);
    const text = Array.from({ length: 900 }, (_, i) => `token${i}`)
      .join(" ")
      .slice(0, 5_000);
    const interaction = discordCommand({
      applicationId: APP_ID,
      user: "1500000000000000001",
      text,
      channelId: "1300000000000000077",
      guildId: "1400000000000000001",
    });
    const res = await post("/connectors/discord", await discordRequest(interaction));
    expect(res).toMatchObject({ status: 200, json: { type: 5 } });
    await eventually(async () => discord.shown().length === 3);
    // The deferred response is edited (the streamed preview, then the reply's first part), and
    // the further parts follow it.
    const calls = posted(discord);
    const edits = calls.filter((c) => c.method === "PATCH");
    expect(edits.length).toBeGreaterThanOrEqual(1);
    expect(edits.every((c) => c.path === `/webhooks/${APP_ID}/${interaction.token}/messages/@original`)).toBe(
      true,
    );
    const further = calls.filter((c) => c.method !== "PATCH");
    expect(further).toHaveLength(2);
    expect(
      further.every((c) => c.method === "POST" && c.path === `/webhooks/${APP_ID}/${interaction.token}`),
    ).toBe(true);
    expect(calls.indexOf(further[0] as (typeof calls)[number])).toBeGreaterThan(
      calls.indexOf(edits.at(-1) as (typeof calls)[number]),
    );
    const parts = discord.shown();
    expect(parts.every((p) => p.length <= 2000)).toBe(true);
    expect(parts.join(" ").replace(/\s+/g, " ")).toBe(`echo: ${text}`.replace(/\s+/g, " "));
  });

  it("once the interaction token is no longer valid, the reply goes to the channel with the bot token", async () => {
    const key = "agent:main:discord:dm:1600000000000000002";
    await prepare(key);
    const interaction = discordCommand({
      applicationId: APP_ID,
      user: "1600000000000000002",
      text: "late answer",
      channelId: "1700000000000000002",
    });
    discord.expire(interaction.token);
    await post("/connectors/discord", await discordRequest(interaction));
    await eventually(async () => posted(discord).length === 1);
    expect(posted(discord)[0]).toMatchObject({
      method: "POST",
      path: "/channels/1700000000000000002/messages",
      headers: expect.objectContaining({ authorization: `Bot ${VARS.DISCORD_BOT_TOKEN}` }),
      body: { content: "echo: late answer" },
    });
  });
});

describe("Discord: posts outside an interaction", () => {
  const bot = { authorization: `Bot ${VARS.DISCORD_BOT_TOKEN}` };
  const opens = () => discord.calls.filter((c) => c.path === "/users/@me/channels");
  const announcement = (text: string): Announcement => ({
    id: `${crypto.randomUUID()}:announcement`,
    text,
    sourceSessionKey: "agent:main:subagent:child",
    init: { agentId: "main", kind: "direct", chatType: "direct", channel: "discord" },
  });

  /** A DM with the bot by slash command, answered through the interaction; the session is recorded. */
  async function dmSession(user: string, dmChannel: string) {
    const key = `agent:main:discord:dm:${user}`;
    await prepare(key);
    discord.addUser(user, { dmChannelId: dmChannel });
    await post(
      "/connectors/discord",
      await discordRequest(discordCommand({ applicationId: APP_ID, user, text: "hi", channelId: dmChannel })),
    );
    await eventually(async () => posted(discord).length === 1);
    await drain(key);
    return key;
  }

  /** Runs `job` for the minute of `at` (the trigger's work, as runScheduled does it). */
  async function runJob(job: Record<string, unknown>, at: number, vars: Record<string, unknown> = VARS) {
    const config = { ...CONFIG, cron: { jobs: [job] } };
    await changeActorEnv(`cron:${job.id}`, { config, vars });
    const e = { ...ENV, SWITCHBOARD_CONFIG: configText(config) } as Env;
    const out = await runDueJobs(e, loadConfig(e), at);
    expect(out.queued).toHaveLength(1);
  }

  async function deliveriesOf(key: string) {
    await drain(key);
    const list = await rpc<{ deliveries: Array<Record<string, unknown>> }>("deliveries.list", {
      sessionKey: key,
    });
    return list.payload.deliveries;
  }

  it("an announcement, a notice and a reply to a DM session go to the DM channel its interaction gave, opened by nobody", async () => {
    const user = "1600000000000000301";
    const dmChannel = "1700000000000000301";
    const key = await dmSession(user, dmChannel);
    expect(await actor(key).postAnnouncement(key, announcement("Status: ok"))).toEqual({ delivered: true });
    // An operator's command, answered as a notice, and a message, answered as a reply, on the
    // session's route: neither has an interaction to answer through.
    expect((await rpc("chat.send", { sessionKey: key, message: "/status", deliver: true })).ok).toBe(true);
    await eventually(async () => posted(discord).length === 3);
    expect((await rpc("chat.send", { sessionKey: key, message: "still there?", deliver: true })).ok).toBe(
      true,
    );
    await eventually(async () => posted(discord).length === 4);

    const outside = posted(discord).slice(1);
    expect(outside.map((c) => [c.method, c.path])).toEqual(
      Array.from({ length: 3 }, () => ["POST", `/channels/${dmChannel}/messages`]),
    );
    expect(outside.every((c) => c.headers.authorization === bot.authorization)).toBe(true);
    expect(outside[0]?.body.content).toBe("Status: ok");
    expect(outside[2]?.body.content).toBe("echo: still there?");
    expect(opens()).toEqual([]);
    // Nothing was ever posted to the user's id as if it were a channel.
    expect(discord.calls.some((c) => c.path === `/channels/${user}/messages`)).toBe(false);
    const deliveries = await deliveriesOf(key);
    expect(deliveries.filter((d) => d.kind !== "reply" || d.text !== "echo: hi")).toEqual(
      Array.from({ length: 3 }, () => expect.objectContaining({ status: "delivered", to: dmChannel })),
    );
    // The session's route keeps the user as its peer and the DM channel as where it is posted.
    const entry = await rpc<{ deliveryContext: unknown }>("sessions.get", { key });
    expect(entry.payload.deliveryContext).toMatchObject({ to: user, postTo: dmChannel });
  });

  it("an announcement to a guild channel's session is posted in that channel, as before", async () => {
    const key = "agent:main:discord:channel:1300000000000000302";
    await prepare(key);
    await post(
      "/connectors/discord",
      await discordRequest(
        discordCommand({
          applicationId: APP_ID,
          user: "1500000000000000302",
          text: "hi",
          channelId: "1300000000000000302",
          guildId: "1400000000000000001",
        }),
      ),
    );
    await eventually(async () => posted(discord).length === 1);
    await drain(key);
    await actor(key).postAnnouncement(key, {
      ...announcement("Status: ok"),
      init: { agentId: "main", kind: "group", chatType: "channel", channel: "discord" },
    });
    await eventually(async () => posted(discord).length === 2);
    expect(posted(discord)[1]).toMatchObject({
      method: "POST",
      path: "/channels/1300000000000000302/messages",
      headers: expect.objectContaining(bot),
    });
    expect(opens()).toEqual([]);
  });

  it("a job's output to user:<id> opens the DM with the bot token and posts there, each time it is delivered", async () => {
    const user = "1600000000000000303";
    const { dmChannelId } = discord.addUser(user);
    const job = {
      id: "dm-digest",
      schedule: "* * * * *",
      message: "digest",
      deliver: { channel: "discord", to: `user:${user}` },
    };
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    await runJob(job, minute + 1_000);
    await eventually(async () => posted(discord).length === 1);
    await runJob(job, minute + 61_000);
    await eventually(async () => posted(discord).length === 2);

    // Opened before each delivery's post (Discord answers the same channel): the job's route has
    // no DM channel to keep, and an attempt keeps it no longer than itself.
    expect(discord.calls.map((c) => [c.method, c.path, c.status])).toEqual([
      ["POST", "/users/@me/channels", 200],
      ["POST", `/channels/${dmChannelId}/messages`, 200],
      ["POST", "/users/@me/channels", 200],
      ["POST", `/channels/${dmChannelId}/messages`, 200],
    ]);
    expect(
      opens().every((c) => c.body.recipient_id === user && c.headers.authorization === bot.authorization),
    ).toBe(true);
    expect(posted(discord).map((c) => c.body.content)).toEqual(["echo: digest", "echo: digest"]);
    expect(await deliveriesOf("cron:dm-digest")).toEqual([
      expect.objectContaining({ status: "delivered", to: `user:${user}`, attempts: 1 }),
      expect.objectContaining({ status: "delivered", to: `user:${user}`, attempts: 1 }),
    ]);
  });

  it("without the bot token, a job's DM is dead at once, naming botTokenEnv; nothing is called", async () => {
    const user = "1600000000000000304";
    discord.addUser(user);
    const job = {
      id: "dm-no-token",
      schedule: "* * * * *",
      message: "x",
      deliver: { channel: "discord", to: `user:${user}` },
    };
    await runJob(job, Date.now(), { ...VARS, DISCORD_BOT_TOKEN: undefined });
    const [dead] = await eventually(async () => {
      const d = await deliveriesOf("cron:dm-no-token");
      return d.length === 1 && d[0]?.status === "dead" && d;
    });
    expect(dead).toMatchObject({
      attempts: 1,
      lastError: expect.stringContaining("DISCORD_BOT_TOKEN (botTokenEnv)"),
    });
    expect(discord.calls).toEqual([]);
  });

  it("Discord refusing the DM is dead at once with its reason; a user's bare id is never posted to as a channel", async () => {
    const stranger = "1600000000000000305";
    const closed = "1600000000000000306";
    const closedUser = discord.addUser(closed, { dmsClosed: true });
    discord.addUser("1600000000000000307");
    const at = Date.now();
    const jobs = [
      {
        id: "dm-stranger",
        schedule: "* * * * *",
        message: "x",
        deliver: { channel: "discord", to: `user:${stranger}` },
      },
      {
        id: "dm-closed",
        schedule: "* * * * *",
        message: "x",
        deliver: { channel: "discord", to: `user:${closed}` },
      },
      {
        id: "dm-bare",
        schedule: "* * * * *",
        message: "x",
        deliver: { channel: "discord", to: "1600000000000000307" },
      },
    ];
    for (const job of jobs) await runJob(job, at);
    const deadOf = (key: string) =>
      eventually(async () => {
        const d = await deliveriesOf(key);
        return d[0]?.status === "dead" && d[0];
      });
    expect(await deadOf("cron:dm-stranger")).toMatchObject({
      attempts: 1,
      lastError: `Discord (opening the DM with user ${stranger}) answered 400: Invalid Recipient(s)`,
    });
    expect(await deadOf("cron:dm-closed")).toMatchObject({
      attempts: 1,
      lastError: "Discord (DM channel) answered 403: Cannot send messages to this user",
    });
    // A bare id is a channel's: Discord has none by a user's id, and says so; the error says how
    // to name a user.
    expect(await deadOf("cron:dm-bare")).toMatchObject({
      attempts: 1,
      lastError: expect.stringMatching(/answered 404: Unknown Channel .*user:<id>/),
    });
    expect(posted(discord)).toEqual([]);

    // Once the user opens their DMs, the operator's retry opens the DM again and delivers it once.
    closedUser.dmsClosed = false;
    const [dead] = await deliveriesOf("cron:dm-closed");
    expect((await rpc("deliveries.retry", { deliveryId: dead?.deliveryId })).ok).toBe(true);
    await eventually(async () => posted(discord).length === 1);
    expect(posted(discord)[0]).toMatchObject({ path: `/channels/${closedUser.dmChannelId}/messages` });
    expect((await deliveriesOf("cron:dm-closed"))[0]).toMatchObject({ status: "delivered" });
  });
});

describe("WhatsApp", () => {
  it("answers the verification handshake", async () => {
    const url = (token: string) =>
      `http://gw.test/connectors/whatsapp?hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=8421`;
    const ok = await app.fetch(new Request(url(VARS.WHATSAPP_VERIFY_TOKEN)), ENV, createExecutionContext());
    expect([ok.status, await ok.text()]).toEqual([200, "8421"]);
    expect((await app.fetch(new Request(url("nope")), ENV, createExecutionContext())).status).toBe(403);
  });

  it("a text message is answered through /<phoneNumberId>/messages; a sticker gets the notice of what is understood", async () => {
    const key = "agent:main:whatsapp:dm:16315551181";
    await prepare(key);
    const note = whatsappNotification({ phoneNumberId: PHONE, from: "16315551181", text: "hola" });
    expect(
      (await post("/connectors/whatsapp", await whatsappRequest(note, VARS.WHATSAPP_APP_SECRET))).status,
    ).toBe(200);
    // The same message again (WhatsApp retries): one run.
    expect(
      (await post("/connectors/whatsapp", await whatsappRequest(note, VARS.WHATSAPP_APP_SECRET))).status,
    ).toBe(200);
    await eventually(async () => posted(whatsapp).length === 1);
    expect(posted(whatsapp)[0]).toMatchObject({
      path: `/${PHONE}/messages`,
      body: { messaging_product: "whatsapp", to: "16315551181", type: "text", text: { body: "echo: hola" } },
    });
    const sticker = whatsappNotification({ phoneNumberId: PHONE, from: "16315551181", type: "sticker" });
    expect(
      (await post("/connectors/whatsapp", await whatsappRequest(sticker, VARS.WHATSAPP_APP_SECRET))).status,
    ).toBe(200);
    expect(posted(whatsapp)).toHaveLength(2);
    expect((posted(whatsapp)[1]!.body.text as { body: string }).body).toMatch(/only text, photos/);
    const history = await rpc<{ messages: unknown[] }>("chat.history", { sessionKey: key });
    expect(history.payload.messages).toHaveLength(2);
  });

  it("a badly signed notification is 401", async () => {
    const note = whatsappNotification({ phoneNumberId: PHONE, from: "1999", text: "x" });
    expect((await post("/connectors/whatsapp", await whatsappRequest(note, "wrong"))).status).toBe(401);
  });
});

describe("a reply of 10,000 characters on every platform", () => {
  const text = Array.from({ length: 1800 }, (_, i) => `word${i}`)
    .join(" ")
    .slice(0, 10_000);
  const cases: Array<{
    name: string;
    limit: number;
    key: string;
    fake: () => FakePlatform;
    send: () => Promise<unknown>;
  }> = [
    {
      name: "Slack (4000)",
      limit: 4000,
      key: "agent:main:slack:dm:ulong",
      fake: () => slack,
      send: async () =>
        post(
          "/connectors/slack",
          await slackRequest(
            slackEvent({ user: "ULONG", channel: "DLONG", text }),
            VARS.SLACK_SIGNING_SECRET,
          ),
        ),
    },
    {
      name: "Discord (2000)",
      limit: 2000,
      key: "agent:main:discord:dm:1600000000000000099",
      fake: () => discord,
      send: async () =>
        post(
          "/connectors/discord",
          await discordRequest(
            discordCommand({
              applicationId: APP_ID,
              user: "1600000000000000099",
              text,
              channelId: "1700000000000000099",
            }),
          ),
        ),
    },
    {
      name: "WhatsApp (4096)",
      limit: 4096,
      key: "agent:main:whatsapp:dm:15550009999",
      fake: () => whatsapp,
      send: async () =>
        post(
          "/connectors/whatsapp",
          await whatsappRequest(
            whatsappNotification({ phoneNumberId: PHONE, from: "15550009999", text }),
            VARS.WHATSAPP_APP_SECRET,
          ),
        ),
    },
  ];
  for (const c of cases) {
    it(`${c.name}: in order, every part within the limit, nothing lost or doubled`, async () => {
      await prepare(c.key);
      await c.send();
      const expected = `echo: ${text}`.replace(/\s+/g, " ");
      // What the chat shows: with streaming on, the first part is the preview, edited.
      await eventually(async () => c.fake().shown().join(" ").replace(/\s+/g, " ").length >= expected.length);
      const parts = c.fake().shown();
      expect(parts.length).toBeGreaterThan(2);
      expect(parts.every((p) => p.length <= c.limit)).toBe(true);
      expect(parts.join(" ").replace(/\s+/g, " ")).toBe(expected);
    });
  }
});

describe("setup, checks and the audit", () => {
  it("connectors.setup registers Telegram's webhook with its secret and Discord's command; connectors.check asks who the bot is", async () => {
    const tg = await rpc<{ ok: boolean; reports: Array<{ ok: boolean; detail: string }> }>(
      "connectors.setup",
      {
        channel: "telegram",
        url: "https://bot.example.com",
      },
    );
    expect(tg.payload.ok).toBe(true);
    expect(telegram.calls.find((c) => c.path.endsWith("/setWebhook"))?.body).toEqual({
      url: "https://bot.example.com/connectors/telegram",
      secret_token: VARS.TELEGRAM_WEBHOOK_SECRET,
      allowed_updates: ["message", "channel_post"],
    });
    const dc = await rpc<{ ok: boolean }>("connectors.setup", {
      channel: "discord",
      url: "https://bot.example.com",
    });
    expect(dc.payload.ok).toBe(true);
    expect(discord.commands).toEqual([
      expect.objectContaining({
        name: "ask",
        options: [
          expect.objectContaining({ name: "message", type: 3, required: false }),
          expect.objectContaining({ name: "attachment", type: 11, required: false }),
        ],
      }),
    ]);
    const sl = await rpc<{ reports: Array<{ detail: string }> }>("connectors.setup", {
      channel: "slack",
      url: "https://bot.example.com",
    });
    expect(sl.payload.reports[0]?.detail).toContain("https://bot.example.com/connectors/slack");
    const check = await rpc<{ reports: Array<{ channel: string; ok: boolean; detail: string }> }>(
      "connectors.check",
    );
    expect(check.payload.reports.find((r) => r.channel === "telegram")).toMatchObject({
      ok: true,
      detail: expect.stringContaining("@helper_bot"),
    });
    expect(check.payload.reports.find((r) => r.channel === "slack")).toMatchObject({
      ok: true,
      detail: expect.stringContaining("U0BOT"),
    });
  });

  it("security.audit lists each connector's type, secrets set (names only) and access policy", async () => {
    const audit = await rpc<{ connectors: Array<Record<string, unknown>> }>("security.audit");
    const tgp = audit.payload.connectors.find((c) => c.channel === "tgp");
    expect(tgp).toMatchObject({
      type: "telegram",
      secrets: [
        { name: "TELEGRAM_BOT_TOKEN", set: true, required: true, accountId: "default" },
        { name: "TELEGRAM_WEBHOOK_SECRET", set: true, required: true, accountId: "default" },
      ],
      access: { dmPolicy: "pairing", groups: { policy: "open", requireMention: true } },
    });
    expect(JSON.stringify(audit.payload)).not.toContain(VARS.TELEGRAM_BOT_TOKEN);
  });
});
