import { describe, expect, it } from "vitest";
import { ConnectorSchema, type SlackConfig } from "../../src/config/connectors";
import { SIGNATURE, slack } from "../../src/connectors/slack";
import { slackRequest } from "../support/platform-requests";

const app = ConnectorSchema.parse({
  type: "slack",
  signingSecretEnv: "SLACK_SIGNING",
  botTokenEnv: "SLACK_BOT",
  botUserId: "U0BOT",
}) as SlackConfig;
const secrets = { SLACK_SIGNING: "8f742231b10e8888abcd99yyyzzz85a5", SLACK_BOT: "xoxb-test" };

/** A request signed as Slack signs it (test/support/platform-requests.ts), `at` the signing time. */
async function signed(body: unknown, opts: { secret?: string; at?: number; now?: number } = {}) {
  const { headers, body: raw } = await slackRequest(body, opts.secret ?? secrets.SLACK_SIGNING, opts.at);
  return {
    url: new URL("https://gw.test/connectors/slack"),
    headers: new Headers(headers),
    raw,
    now: opts.now ?? Date.now(),
  };
}

function callback(event: Record<string, unknown>) {
  return { type: "event_callback", team_id: "T1", api_app_id: "A1", event_id: "Ev1", event_time: 1, event };
}

describe("Slack: verification", () => {
  it("accepts a v0 signature within 5 minutes, refuses a wrong secret, an old timestamp, a missing header", async () => {
    const body = callback({
      type: "message",
      channel: "D1",
      channel_type: "im",
      user: "U1",
      text: "hi",
      ts: "1.1",
    });
    expect(await slack.verify(await signed(body), app, secrets)).toEqual({ ok: true });
    expect(await slack.verify(await signed(body, { secret: "other" }), app, secrets)).toMatchObject({
      ok: false,
    });
    const old = Date.now() - 301_000;
    expect(await slack.verify(await signed(body, { at: old }), app, secrets)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("away from now"),
    });
    const req = await signed(body);
    req.headers.delete(SIGNATURE);
    expect(await slack.verify(req, app, secrets)).toMatchObject({ ok: false });
    // A body changed after signing.
    const tampered = await signed(body);
    tampered.raw = tampered.raw.replace("hi", "ho");
    expect(await slack.verify(tampered, app, secrets)).toMatchObject({ ok: false });
  });
});

describe("Slack: events to SPEC §4 messages", () => {
  it("answers url_verification with its challenge", () => {
    expect(slack.receive({ type: "url_verification", token: "x", challenge: "3eZbrw1aB" }, app)).toEqual({
      answer: { status: 200, body: { challenge: "3eZbrw1aB" } },
      messages: [],
    });
  });

  it("im is direct, mpim and private channels group, public channels channel; thread_ts is the thread", () => {
    const at = (channel_type: string, extra: Record<string, unknown> = {}) =>
      slack.receive(
        callback({
          type: "message",
          channel: "C9",
          channel_type,
          user: "U7",
          text: "yo",
          ts: "1700000000.000100",
          ...extra,
        }),
        app,
      ).messages[0];
    expect(at("im")).toEqual({
      inbound: {
        messageId: "C9:1700000000.000100",
        chatType: "direct",
        from: "U7",
        text: "yo",
        timestamp: 1_700_000_000_000,
      },
      mentioned: false,
      replyTo: "1700000000.000100",
    });
    expect(at("mpim")?.inbound).toMatchObject({ chatType: "group", groupId: "C9" });
    expect(at("group")?.inbound).toMatchObject({ chatType: "group", groupId: "C9" });
    expect(at("channel", { thread_ts: "1699999999.000001" })?.inbound).toMatchObject({
      chatType: "channel",
      groupId: "C9",
      threadId: "1699999999.000001",
    });
    // A thread's parent is not in a thread.
    expect(at("channel", { thread_ts: "1700000000.000100" })?.inbound.threadId).toBeUndefined();
  });

  it("app_mention and <@bot> are mentions; the same post as message and app_mention has one id", () => {
    const post = { channel: "C9", user: "U7", text: "<@U0BOT> help", ts: "5.5" };
    const mention = slack.receive(callback({ type: "app_mention", ...post }), app).messages[0];
    const message = slack.receive(callback({ type: "message", channel_type: "channel", ...post }), app)
      .messages[0];
    expect(mention?.mentioned).toBe(true);
    expect(message?.mentioned).toBe(true);
    expect(mention?.inbound.messageId).toBe(message?.inbound.messageId);
    expect(mention?.inbound.chatType).toBe("channel");
  });

  it("ignores the bot's own messages, other bots, edits and deletions", () => {
    for (const event of [
      { type: "message", channel: "D1", channel_type: "im", user: "U0BOT", text: "me", ts: "1.1" },
      {
        type: "message",
        channel: "D1",
        channel_type: "im",
        bot_id: "B9",
        user: "U9",
        text: "bot",
        ts: "1.2",
      },
      { type: "message", subtype: "bot_message", channel: "D1", channel_type: "im", text: "bot", ts: "1.3" },
      { type: "message", subtype: "message_changed", channel: "D1", channel_type: "im", ts: "1.4" },
      { type: "message", subtype: "message_deleted", channel: "D1", channel_type: "im", ts: "1.5" },
      { type: "reaction_added", user: "U1" },
    ]) {
      expect(slack.receive(callback(event), app).messages).toEqual([]);
    }
  });
});
