/**
 * Streamed replies end to end against `wrangler dev` (SPEC §22): the fake model answers the
 * gateway's streaming call in pieces over STREAM_MS (5 s here; 30 s in `npm run checks`, with
 * SWITCHBOARD_STREAM_MS=30000), and a Telegram, a Slack and a Discord chat, written to at
 * once, each see one preview edited as the reply grows, never more than about one edit a
 * second, ending with the whole reply exactly once. Then the gateway is killed (SIGKILL)
 * mid-stream and restarted on the same state: the run resumes, edits the same preview, and the
 * chat shows the reply once with no preview left behind. The pace itself is checked on a
 * virtual clock in test/unit/reply-preview.test.ts.
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
} from "../support/platform-requests.ts";
import {
  APP_ID,
  platformConnectors,
  platformFakes,
  PLATFORM_SECRETS as VARS,
} from "../support/platform-world.ts";
import { type FakeModel, startFakeModel } from "./support/fake-model.ts";
import { type Gateway, settled, startGateway, waitFor } from "./support/gateway.ts";
import { type PlatformServer, startPlatformServer } from "./support/platform-server.ts";

const STREAM_MS = Number(process.env.SWITCHBOARD_STREAM_MS ?? 5_000);
const PIECES = Math.max(10, Math.round(STREAM_MS / 100));
const REPLY = Array.from({ length: 150 }, (_, i) => `word${i}`).join(" ");

let gw: Gateway;
let server: PlatformServer;
let model: FakeModel;
const { telegram, slack, discord } = platformFakes();

beforeAll(async () => {
  [server, model] = await Promise.all([
    startPlatformServer({ "/telegram": telegram, "/slack": slack, "/discord": discord }),
    startFakeModel(),
  ]);
  model.setFallback({ text: REPLY, stream: { pieces: PIECES, delayMs: STREAM_MS / PIECES } });
  gw = await startGateway({
    config: {
      session: { dmScope: "per-channel-peer" },
      models: {
        providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } },
        retry: { attempts: 2, baseDelayMs: 50 },
      },
      agents: { defaults: { model: "fake/streaming" } },
      connectors: platformConnectors((p) => server.base(`/${p}`)),
    },
    vars: VARS,
  });
}, 180_000);

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([server?.close(), model?.close()]);
});

async function post(channel: string, req: SignedRequest) {
  const res = await gw.fetch(`/connectors/${channel}`, {
    method: "POST",
    headers: req.headers,
    body: req.body,
  });
  expect(res.status).toBeLessThan(300);
  await res.body?.cancel();
}

/** The edits a chat's preview got, and over how long they came (the fake's clock). */
function paceOf(fake: FakePlatform, isEdit: (path: string, method: string) => boolean) {
  const edits = fake.calls.filter((c) => isEdit(c.path, c.method));
  const span = (edits.at(-1)?.at ?? 0) - (edits[0]?.at ?? 0);
  return { edits: edits.length, span };
}

describe("streamed replies against wrangler dev", () => {
  it(`Telegram, Slack and Discord at once: a ${STREAM_MS / 1000}-second answer edits one preview about once a second and ends showing the reply once`, async () => {
    const discordInteraction = discordCommand({
      applicationId: APP_ID,
      user: "1600000000000000501",
      text: "tell me a story",
      channelId: "1700000000000000501",
    });
    await Promise.all([
      post(
        "telegram",
        telegramRequest(
          telegramUpdate({ from: 8101, text: "tell me a story" }),
          VARS.TELEGRAM_WEBHOOK_SECRET,
        ),
      ),
      post(
        "slack",
        await slackRequest(
          slackEvent({ user: "U0E2E", channel: "D0E2E", text: "tell me a story" }),
          VARS.SLACK_SIGNING_SECRET,
        ),
      ),
      post("discord", await discordRequest(discordInteraction)),
    ]);
    await waitFor(
      () =>
        telegram.shown("8101").includes(REPLY) &&
        slack.shown("U0E2E").includes(REPLY) &&
        discord.shown().includes(REPLY),
      STREAM_MS + 60_000,
      { what: "the whole reply on each chat" },
    );
    await settled(gw, [
      "agent:main:telegram:dm:8101",
      "agent:main:slack:dm:u0e2e",
      "agent:main:discord:dm:1600000000000000501",
    ]);
    // Each chat shows the reply exactly once, and nothing else.
    expect(telegram.shown("8101")).toEqual([REPLY]);
    expect(slack.shown("U0E2E")).toEqual([REPLY]);
    expect(discord.shown()).toEqual([REPLY]);
    // One message each, edited as it grew: at most one edit per second of its span (plus the
    // first post), and far fewer than the model's pieces.
    const paces = {
      telegram: paceOf(telegram, (p) => p.endsWith("/editMessageText")),
      slack: paceOf(slack, (p) => p === "/chat.update"),
      discord: paceOf(discord, (p, m) => m === "PATCH" && p.endsWith("/@original")),
    };
    console.log(
      `streamed ${STREAM_MS / 1000} s in ${PIECES} pieces: ${Object.entries(paces)
        .map(([name, p]) => `${name} ${p.edits} edits over ${(p.span / 1000).toFixed(1)} s`)
        .join(", ")}`,
    );
    for (const [name, pace] of Object.entries(paces)) {
      expect(pace.edits, name).toBeGreaterThanOrEqual(2);
      expect(pace.edits, name).toBeLessThanOrEqual(Math.floor(pace.span / 1_000) + 2);
      expect(pace.edits, name).toBeLessThan(PIECES / 2);
    }
    expect(telegram.calls.filter((c) => c.path.endsWith("/sendMessage"))).toHaveLength(1);
    expect(slack.calls.filter((c) => c.path === "/chat.postMessage")).toHaveLength(1);
  });

  it("a kill mid-stream: the restarted gateway resumes the run, edits the same preview, and the reply shows once", async () => {
    const key = "agent:main:telegram:dm:8102";
    // A long stream, cut off by the kill; the resumed run's call gets a short one.
    model.push({ text: REPLY, stream: { pieces: 100, delayMs: 100 } });
    model.push({ text: REPLY, stream: { pieces: 5, delayMs: 50 } });
    await post(
      "telegram",
      telegramRequest(telegramUpdate({ from: 8102, text: "a long one" }), VARS.TELEGRAM_WEBHOOK_SECRET),
    );
    // The preview is up and has been edited (its id long kept): the process dies.
    await waitFor(
      () => [...telegram.messages.values()].some((m) => m.chat === "8102" && m.edits >= 1),
      30_000,
      { what: "an edited preview" },
    );
    const { persistTo, options } = gw;
    await gw.stop("SIGKILL");
    gw = await startGateway({ ...options, persistTo });
    await waitFor(() => telegram.shown("8102").includes(REPLY), 60_000, {
      what: "the reply after the restart",
    });
    await settled(gw, key);
    expect(telegram.shown("8102")).toEqual([REPLY]);
    expect(
      telegram.calls.filter((c) => c.path.endsWith("/sendMessage") && String(c.body.chat_id) === "8102"),
    ).toHaveLength(1);
    const deliveries = await gw.call<{ deliveries: Array<{ kind: string; status: string }> }>(
      "deliveries.list",
      {
        sessionKey: key,
      },
    );
    expect(deliveries.deliveries).toEqual([expect.objectContaining({ kind: "reply", status: "delivered" })]);
  });
});
