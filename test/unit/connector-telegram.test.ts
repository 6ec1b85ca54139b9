import { describe, expect, it } from "vitest";
import type { TelegramConfig } from "../../src/config/connectors";
import { ConnectorSchema } from "../../src/config/connectors";
import { SECRET_TOKEN_HEADER, telegram } from "../../src/connectors/telegram";

const bot = ConnectorSchema.parse({
  type: "telegram",
  botTokenEnv: "TG_TOKEN",
  webhookSecretEnv: "TG_SECRET",
  botUsername: "@helper_bot",
}) as TelegramConfig;
const secrets = { TG_TOKEN: "123:abc", TG_SECRET: "s3cret-token_value" };

function req(headers: Record<string, string>, raw = "{}") {
  return {
    url: new URL("https://gw.test/connectors/telegram"),
    headers: new Headers(headers),
    raw,
    now: Date.now(),
  };
}

// Updates as the Bot API documents them (core.telegram.org/bots/api#update).
const privateText = {
  update_id: 900001,
  message: {
    message_id: 11,
    from: { id: 42, is_bot: false, first_name: "Ann", last_name: "Lee", username: "ann" },
    chat: { id: 42, type: "private", first_name: "Ann" },
    date: 1_790_000_000,
    text: "hello there",
  },
};

describe("Telegram: verification", () => {
  it("accepts the secret token given to setWebhook, and nothing else", async () => {
    expect(await telegram.verify(req({ [SECRET_TOKEN_HEADER]: secrets.TG_SECRET }), bot, secrets)).toEqual({
      ok: true,
    });
    expect(await telegram.verify(req({ [SECRET_TOKEN_HEADER]: "wrong" }), bot, secrets)).toMatchObject({
      ok: false,
    });
    expect(await telegram.verify(req({}), bot, secrets)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("missing"),
    });
  });
});

describe("Telegram: updates to SPEC §4 messages", () => {
  it("a private chat is a direct message from the user", () => {
    const { messages, answer } = telegram.receive(privateText, bot);
    expect(answer.status).toBe(200);
    expect(messages).toEqual([
      {
        inbound: {
          messageId: "900001",
          chatType: "direct",
          from: "42",
          to: "42",
          text: "hello there",
          senderName: "Ann Lee",
          timestamp: 1_790_000_000_000,
        },
        mentioned: false,
        replyTo: "11",
      },
    ]);
  });

  it("groups and supergroups are groups; a forum topic is the thread; a caption is the text", () => {
    const { messages } = telegram.receive(
      {
        update_id: 900002,
        message: {
          message_id: 12,
          message_thread_id: 7,
          is_topic_message: true,
          from: { id: 43, is_bot: false, first_name: "Bo" },
          chat: { id: -100555, type: "supergroup", title: "Team", is_forum: true },
          caption: "@Helper_Bot look at this",
          date: 1_790_000_001,
        },
      },
      bot,
    );
    expect(messages[0]).toMatchObject({
      inbound: {
        chatType: "group",
        from: "43",
        groupId: "-100555",
        threadId: "7",
        topic: true,
        groupSubject: "Team",
        text: "@Helper_Bot look at this",
      },
      mentioned: true,
    });
  });

  it("a reply to the bot is a mention; plain group chatter is not", () => {
    const group = { id: -1, type: "group", title: "G" };
    const reply = telegram.receive(
      {
        update_id: 3,
        message: {
          message_id: 5,
          from: { id: 7, is_bot: false, first_name: "C" },
          chat: group,
          text: "and then?",
          reply_to_message: {
            message_id: 4,
            from: { id: 99, is_bot: true, username: "helper_bot" },
            chat: group,
          },
        },
      },
      bot,
    );
    expect(reply.messages[0]?.mentioned).toBe(true);
    const chatter = telegram.receive(
      {
        update_id: 4,
        message: {
          message_id: 6,
          from: { id: 7, is_bot: false },
          chat: group,
          text: "email me at x@helper_botty.com",
        },
      },
      bot,
    );
    expect(chatter.messages[0]?.mentioned).toBe(false);
  });

  it("a channel post is a channel message", () => {
    const { messages } = telegram.receive(
      {
        update_id: 5,
        channel_post: {
          message_id: 1,
          sender_chat: { id: -200, type: "channel", title: "News" },
          chat: { id: -200, type: "channel", title: "News" },
          text: "post",
        },
      },
      bot,
    );
    expect(messages[0]?.inbound).toMatchObject({ chatType: "channel", from: "-200", groupId: "-200" });
  });

  it("acknowledges and ignores edits, bots, and messages without text", () => {
    for (const update of [
      { update_id: 6, edited_message: privateText.message },
      { update_id: 7, message: { ...privateText.message, from: { id: 5, is_bot: true, first_name: "B" } } },
      { update_id: 8, message: { ...privateText.message, text: undefined, sticker: {} } },
      { update_id: 9, my_chat_member: {} },
    ]) {
      const got = telegram.receive(update, bot);
      expect(got).toEqual({ answer: { status: 200, body: {} }, messages: [] });
    }
  });

  it("refuses a body that is not an Update", () => {
    expect(() => telegram.receive({ message: {} }, bot)).toThrow(/update_id/);
  });
});
