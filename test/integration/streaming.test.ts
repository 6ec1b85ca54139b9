/**
 * Replies streamed into chats (SPEC §22), in workerd against the platform fakes: the model's
 * answer arrives as server-sent events in pieces over a few seconds, the chat gets one preview
 * that is edited as it grows (Telegram editMessageText, Slack chat.update, Discord edits of the
 * deferred response), far fewer edits than pieces, and ends showing the whole reply exactly
 * once; `progress` shows the run's progress and deletes it when the reply goes out; a failing
 * final edit falls back to a new message and deletes the stale preview; a run that fails
 * deletes its preview; a crash mid-stream ends with the reply once and no preview left; the
 * bridge that opted in gets signed preview POSTs under the reply's deliveryId. The pace of the
 * edits over a long stream is unit-tested on a virtual clock (test/unit/reply-preview.test.ts).
 */
import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature";
import { RUN_FAILED_NOTICE } from "../../src/session/chat/posts";
import { type StreamedAnswer, streamedCompletion } from "../support/completion-stream";
import type { fakeDiscord, fakeSlack, fakeTelegram } from "../support/platform-fakes";
import {
  discordCommand,
  discordRequest,
  type SignedRequest,
  slackEvent,
  slackRequest,
  telegramRequest,
  telegramUpdate,
} from "../support/platform-requests";
import {
  APP_ID,
  FAKE_BASES,
  PLATFORM_SECRETS,
  platformConnectors,
  platformFakes,
} from "../support/platform-world";
import {
  actor,
  callApp,
  changeActorEnv,
  configText,
  drain,
  eventually,
  recorded,
  signedInbound,
} from "./support";

const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const BASES = FAKE_BASES;

function configWith(telegramStreaming?: Record<string, unknown>) {
  const connectors = platformConnectors((p) => BASES[p]) as Record<string, Record<string, unknown>>;
  if (telegramStreaming) connectors.telegram = { ...connectors.telegram, streaming: telegramStreaming };
  return {
    ...TEST_CONFIG,
    session: { dmScope: "per-channel-peer" },
    models: {
      providers: { fake: { api: "openai-compatible", baseUrl: "https://model.test/v1" } },
      retry: { attempts: 1, baseDelayMs: 1 },
    },
    agents: { defaults: { model: "fake/m" } },
    connectors: {
      ...connectors,
      bridge: {
        deliverUrl: "https://connector.test/bridge",
        secretEnv: "DEV_CONNECTOR_SECRET",
        streaming: { mode: "partial" },
      },
    },
  };
}
const CONFIG = configWith();
const VARS = { ...PLATFORM_SECRETS, DEV_CONNECTOR_SECRET: "test-connector-secret" };
const ENV = { ...env, ...VARS, SWITCHBOARD_CONFIG: configText(CONFIG) } as Env;

/** A reply long enough to be previewed, in PIECES pieces DELAY_MS apart (about 2.4 s). */
const FULL = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ");
const PIECES = 30;
const DELAY_MS = 80;

let telegram: ReturnType<typeof fakeTelegram>;
let slack: ReturnType<typeof fakeSlack>;
let discord: ReturnType<typeof fakeDiscord>;
/** What the model answers next (each request takes the first; the last one stays). */
let answers: Array<(StreamedAnswer & { failAfter?: number }) | { error: number }>;
let modelCalls: number;
/** Bumped by a simulated crash: streams begun before it fail where they are. */
let epoch = 0;
const bridgePosts: Array<{ body: Record<string, unknown>; signed: boolean }> = [];

beforeEach(() => {
  ({ telegram, slack, discord } = platformFakes());
  answers = [{ text: FULL, pieces: PIECES, delayMs: DELAY_MS }];
  modelCalls = 0;
  bridgePosts.length = 0;
  const real = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const req = new Request(input, init);
    if (req.url.startsWith(BASES.telegram)) return telegram.handle(req, BASES.telegram);
    if (req.url.startsWith(BASES.slack)) return slack.handle(req, BASES.slack);
    if (req.url.startsWith(BASES.discord)) return discord.handle(req, BASES.discord);
    if (req.url === "https://model.test/v1/chat/completions") {
      const body = (await req.json()) as { stream?: boolean };
      modelCalls++;
      const answer = (answers.length > 1 ? answers.shift() : answers[0]) as (typeof answers)[number];
      if ("error" in answer)
        return Response.json(
          { error: { message: "fake failure", code: answer.error } },
          { status: answer.error },
        );
      // A chat that does not stream gets its answer whole (generateText).
      if (!body.stream)
        return Response.json({
          id: "c",
          object: "chat.completion",
          created: 0,
          model: "m",
          choices: [
            { index: 0, message: { role: "assistant", content: answer.text ?? "" }, finish_reason: "stop" },
          ],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        });
      const born = epoch;
      let events = 0;
      return streamedCompletion(
        answer,
        () => born === epoch && (answer.failAfter === undefined || events++ < answer.failAfter),
      );
    }
    if (req.url === "https://connector.test/bridge") {
      const raw = await req.text();
      const signed = req.headers.get(SIGNATURE_HEADER) === (await signBody("test-connector-secret", raw));
      bridgePosts.push({ body: JSON.parse(raw) as Record<string, unknown>, signed });
      return new Response("ok");
    }
    return real(input, init);
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

const call = (path: string, init: RequestInit, e: Env = ENV) => callApp(e, path, init);

async function post(path: string, req: SignedRequest, e: Env = ENV) {
  const res = await call(path, { method: "POST", headers: req.headers, body: req.body }, e);
  expect(res.status).toBeLessThan(300);
}

async function sendTelegram(from: number, config = CONFIG) {
  const key = `agent:main:telegram:dm:${from}`;
  await changeActorEnv(key, { config, vars: VARS });
  const e = { ...ENV, SWITCHBOARD_CONFIG: configText(config) } as Env;
  await post(
    "/connectors/telegram",
    telegramRequest(telegramUpdate({ from, text: "tell me a story" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    e,
  );
  return key;
}

/** The calls that showed the chat's preview or reply (posts, edits, deletes), in order. */
const telegramPreviewCalls = (chat: string) =>
  telegram.calls.filter(
    (c) => /\/(sendMessage|editMessageText|deleteMessage)$/.test(c.path) && String(c.body.chat_id) === chat,
  );

describe("streamed replies", () => {
  it("Telegram: one preview, edited as the reply grows, ends showing the whole reply once", async () => {
    const key = await sendTelegram(6101);
    await eventually(async () => telegram.shown("6101").includes(FULL), 15_000);
    await drain(key);
    expect(telegram.shown("6101")).toEqual([FULL]);
    const calls = telegramPreviewCalls("6101");
    // One message was posted; everything after it was an edit of that message.
    expect(calls.filter((c) => c.path.endsWith("/sendMessage"))).toHaveLength(1);
    expect(calls.slice(1).every((c) => c.path.endsWith("/editMessageText"))).toBe(true);
    // Edited while it grew (at least once before the reply's own edit), far fewer times than
    // the model sent pieces: at most one edit per second.
    const [message] = [...telegram.messages.values()].filter((m) => m.chat === "6101");
    expect(message?.edits).toBeGreaterThanOrEqual(2);
    expect(calls.length).toBeLessThan(PIECES / 2);
    // The first preview showed a start of the reply, not all of it.
    expect(FULL.startsWith(String(calls[0]?.body.text))).toBe(true);
    expect(String(calls[0]?.body.text).length).toBeLessThan(FULL.length);
  });

  it("Slack: a preview posted with chat.postMessage and updated with chat.update, the reply once", async () => {
    const key = "agent:main:slack:dm:u0str";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    await post(
      "/connectors/slack",
      await slackRequest(
        slackEvent({ user: "U0STR", channel: "D0STR", text: "tell me a story" }),
        VARS.SLACK_SIGNING_SECRET,
      ),
    );
    // A DM's posts are addressed to the user (Slack opens the DM).
    await eventually(async () => slack.shown("U0STR").includes(FULL), 15_000);
    await drain(key);
    expect(slack.shown("U0STR")).toEqual([FULL]);
    expect(slack.calls.filter((c) => c.path === "/chat.postMessage")).toHaveLength(1);
    const updates = slack.calls.filter((c) => c.path === "/chat.update");
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect(updates.length).toBeLessThan(PIECES / 2);
    expect(updates.at(-1)?.body.text).toBe(FULL);
  });

  it("Discord: the deferred response is the preview, edited, and ends as the reply", async () => {
    const key = "agent:main:discord:dm:1600000000000000301";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const interaction = discordCommand({
      applicationId: APP_ID,
      user: "1600000000000000301",
      text: "tell me a story",
      channelId: "1700000000000000301",
    });
    await post("/connectors/discord", await discordRequest(interaction));
    await eventually(async () => discord.shown().includes(FULL), 15_000);
    await drain(key);
    expect(discord.shown()).toEqual([FULL]);
    const edits = discord.calls.filter((c) => c.method === "PATCH" && c.path.endsWith("/messages/@original"));
    expect(edits.length).toBeGreaterThanOrEqual(2);
    expect(edits.length).toBeLessThan(PIECES / 2);
    expect(discord.calls.filter((c) => c.method === "POST" && c.path.includes("/webhooks/"))).toHaveLength(0);
  });

  it("progress: the preview shows what the run does and is deleted when the reply goes out", async () => {
    answers = [
      // Slow enough that the tool's line comes a second after "Thinking…" (one edit a second).
      { toolCalls: [{ id: "call_1", name: "sessions_list", arguments: {} }], delayMs: 300 },
      { text: FULL, pieces: 4, delayMs: 10 },
    ];
    const key = await sendTelegram(6102, configWith({ mode: "progress" }));
    await eventually(async () => telegram.shown("6102").includes(FULL), 15_000);
    await drain(key);
    expect(telegram.shown("6102")).toEqual([FULL]);
    const calls = telegramPreviewCalls("6102");
    expect(calls[0]?.body.text).toBe("Thinking…");
    expect(calls.some((c) => c.body.text === "Using sessions_list…")).toBe(true);
    // Deleted before the reply was posted as a message of its own.
    const deleted = calls.findIndex((c) => c.path.endsWith("/deleteMessage"));
    const reply = calls.findIndex((c) => c.path.endsWith("/sendMessage") && c.body.text === FULL);
    expect(deleted).toBeGreaterThan(0);
    expect(reply).toBeGreaterThan(deleted);
  });

  it("a final edit that fails falls back to a new message, and the stale preview is deleted", async () => {
    telegram.failWhen((c) => c.path.endsWith("/editMessageText") && c.body.text === FULL, 400, 5);
    const key = await sendTelegram(6103);
    await eventually(async () => telegram.shown("6103").includes(FULL), 15_000);
    await drain(key);
    expect(telegram.shown("6103")).toEqual([FULL]);
    const calls = telegramPreviewCalls("6103");
    expect(calls.filter((c) => c.path.endsWith("/deleteMessage") && c.status === 200)).toHaveLength(1);
    expect(calls.filter((c) => c.path.endsWith("/sendMessage") && c.body.text === FULL)).toHaveLength(1);
  });

  it("a run that fails deletes its preview; the chat hears the notice only", async () => {
    // The stream breaks off after a preview's worth of text: the call fails, and so does the run.
    answers = [{ text: FULL, pieces: PIECES, delayMs: DELAY_MS, failAfter: 12 }];
    const key = await sendTelegram(6104);
    await eventually(async () => telegram.shown("6104").includes(RUN_FAILED_NOTICE), 15_000);
    await drain(key);
    expect(telegram.shown("6104")).toEqual([RUN_FAILED_NOTICE]);
    const calls = telegramPreviewCalls("6104");
    expect(calls[0]?.path).toMatch(/\/sendMessage$/);
    expect(calls[0]?.body.text).not.toBe(RUN_FAILED_NOTICE);
    expect(calls.filter((c) => c.path.endsWith("/deleteMessage") && c.status === 200)).toHaveLength(1);
  });

  it("a crash mid-stream: the resumed run edits the same preview, and the reply shows once with no preview left", async () => {
    answers = [{ text: FULL, pieces: PIECES, delayMs: 150 }];
    const key = await sendTelegram(6105);
    // The preview is up and the model is still writing: the process dies.
    await eventually(async () => telegram.shown("6105").length === 1 && modelCalls === 1, 15_000);
    epoch++;
    await abortAllDurableObjects();
    answers = [{ text: FULL, pieces: 3, delayMs: 10 }];
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    await runDurableObjectAlarm(actor(key));
    await eventually(async () => telegram.shown("6105").includes(FULL), 15_000);
    await drain(key);
    expect(modelCalls).toBe(2);
    expect(telegram.shown("6105")).toEqual([FULL]);
    expect(telegramPreviewCalls("6105").filter((c) => c.path.endsWith("/sendMessage"))).toHaveLength(1);
  });

  it("the bridge that opted in gets signed preview POSTs before its reply, under the reply's deliveryId", async () => {
    const key = "agent:main:bridge:dm:alice";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const raw = JSON.stringify({
      messageId: "b-stream-1",
      chatType: "direct",
      from: "alice",
      text: "tell me a story",
    });
    const res = await call("/hooks/inbound/bridge", await signedInbound(raw));
    expect(res.status).toBe(202);
    await eventually(async () => bridgePosts.some((p) => p.body.kind === "reply"), 15_000);
    await drain(key);
    const previews = bridgePosts.filter((p) => p.body.kind === "preview");
    const reply = bridgePosts.find((p) => p.body.kind === "reply");
    expect(previews.length).toBeGreaterThanOrEqual(1);
    expect(previews.length).toBeLessThan(PIECES / 2);
    expect(bridgePosts.every((p) => p.signed)).toBe(true);
    expect(previews.every((p) => p.body.deliveryId === reply?.body.deliveryId)).toBe(true);
    expect(bridgePosts.indexOf(reply as (typeof bridgePosts)[number])).toBe(bridgePosts.length - 1);
    expect(reply?.body.text).toBe(FULL);
  });
  it("streaming adds no D1 statement: a streamed reply's session writes what a plain one's does", async () => {
    /** The SQL an actor sends its D1, statement by statement, batches marked. */
    const counting = () => {
      const seen: string[] = [];
      const wrap = (db: D1Database) =>
        recorded(db, (method, args) => {
          if (method === "batch") seen.push(`batch of ${(args[0] as unknown[]).length}`);
          if (method === "prepare") seen.push(String(args[0]));
        });
      return { seen, wrap };
    };
    const measure = async (from: number, streaming: Record<string, unknown>) => {
      const config = configWith(streaming);
      const key = `agent:main:telegram:dm:${from}`;
      const d1 = counting();
      await changeActorEnv(key, { config, vars: VARS, databases: d1.wrap });
      const e = { ...ENV, SWITCHBOARD_CONFIG: configText(config) } as Env;
      const say = (text: string) =>
        post(
          "/connectors/telegram",
          telegramRequest(telegramUpdate({ from, text }), VARS.TELEGRAM_WEBHOOK_SECRET),
          e,
        );
      // The first message makes the session; the second is the one counted.
      await say("hello");
      await eventually(async () => telegram.shown(String(from)).length === 1, 15_000);
      await drain(key);
      d1.seen.length = 0;
      await say("and again");
      await eventually(async () => telegram.shown(String(from)).length === 2, 15_000);
      await drain(key);
      expect(telegram.shown(String(from))).toEqual([FULL, FULL]);
      return d1.seen;
    };
    const streamed = await measure(6301, { mode: "partial" });
    const plain = await measure(6302, { mode: "off" });
    const edits = telegram.calls.filter(
      (c) => c.path.endsWith("/editMessageText") && String(c.body.chat_id) === "6301",
    );
    expect(edits.length).toBeGreaterThanOrEqual(2);
    expect(plain.length).toBeGreaterThan(0);
    expect(streamed).toEqual(plain);
  });
});
