/**
 * Files people send (SPEC §22), in workerd: a Telegram photo reaches a model that sees as image
 * input and is kept in R2 (`GET /v1/media/:mediaId` returns it, with the operator token only); a
 * voice note is transcribed and its transcript is the user message; a text document is given
 * inline; a file past `media.maxBytes` gets one notice and no run; the bridge's https attachment
 * is fetched the same way, and a Slack file with the bot token from Slack's host only; a session
 * deleted with its transcript takes its files along; a run
 * that crashes after its files were fetched does not fetch or transcribe them again.
 */
import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { TranscriptMessage } from "../../src/transcript/message";
import { streamedCompletion } from "../support/completion-stream";
import type { fakeDiscord, fakeSlack, fakeTelegram, fakeWhatsApp } from "../support/platform-fakes";
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
  TOKEN,
} from "./support";

const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const BASES = FAKE_BASES;
const MAX_BYTES = 4_000;
const CONFIG = {
  ...TEST_CONFIG,
  session: { dmScope: "per-channel-peer" },
  models: {
    providers: { fake: { api: "openai-compatible", baseUrl: "https://model.test/v1", vision: true } },
    retry: { attempts: 1, baseDelayMs: 1 },
  },
  agents: { defaults: { model: "fake/m" } },
  media: { r2: "MEDIA", maxBytes: MAX_BYTES, transcription: { model: "fake/whisper-1" } },
  connectors: {
    ...platformConnectors((p) => BASES[p]),
    bridge: { deliverUrl: "https://connector.test/bridge", secretEnv: "DEV_CONNECTOR_SECRET" },
  },
};
const VARS = PLATFORM_SECRETS;
const ENV = { ...env, ...VARS, SWITCHBOARD_CONFIG: configText(CONFIG) } as Env;

let telegram: ReturnType<typeof fakeTelegram>;
let slack: ReturnType<typeof fakeSlack>;
let discord: ReturnType<typeof fakeDiscord>;
let whatsapp: ReturnType<typeof fakeWhatsApp>;
/** What the bridge's deliverUrl was posted. */
let bridged: Array<Record<string, unknown>>;
/** The chat completions the model was asked, and the transcriptions. */
let completions: Array<{ messages: Array<{ role: string; content: unknown }> }>;
let transcriptions: number;
const files = new Map<string, string>();
/** While set, the model's answers wait; a crash (`epoch` bumped) fails those made before it. */
let holdModel = false;
let epoch = 0;

beforeEach(() => {
  ({ telegram, slack, discord, whatsapp } = platformFakes());
  bridged = [];
  completions = [];
  transcriptions = 0;
  holdModel = false;
  const real = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const req = new Request(input, init);
    if (req.url.startsWith(BASES.telegram)) return telegram.handle(req, BASES.telegram);
    if (req.url.startsWith(BASES.slack)) return slack.handle(req, BASES.slack);
    if (req.url.startsWith(BASES.discord)) return discord.handle(req, BASES.discord);
    if (req.url.startsWith(BASES.whatsapp)) return whatsapp.handle(req, BASES.whatsapp);
    if (req.url === "https://model.test/v1/audio/transcriptions") {
      transcriptions++;
      const form = await req.formData();
      expect(form.get("model")).toBe("whisper-1");
      expect(form.get("file")).toBeInstanceOf(File);
      return Response.json({ text: "hello from a voice note" });
    }
    if (req.url === "https://model.test/v1/chat/completions") {
      const body = (await req.json()) as (typeof completions)[number];
      completions.push(body);
      const born = epoch;
      while (holdModel && born === epoch) await new Promise((r) => setTimeout(r, 5));
      if (born !== epoch) throw new Error("simulated crash: the process died here");
      // A chat that streams (SPEC §22) asks for server-sent events.
      if ((body as { stream?: boolean }).stream) return streamedCompletion({ text: "got it" });
      return Response.json({
        id: "c",
        object: "chat.completion",
        created: 0,
        model: "m",
        choices: [{ index: 0, message: { role: "assistant", content: "got it" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
      });
    }
    if (req.url.startsWith("https://files.test/")) {
      const text = files.get(req.url);
      return text === undefined
        ? new Response("gone", { status: 404 })
        : new Response(text, { headers: { "content-type": "text/plain" } });
    }
    if (req.url.startsWith("https://connector.test/")) {
      bridged.push((await req.json()) as Record<string, unknown>);
      return new Response("ok");
    }
    return real(input, init);
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

const call = (path: string, init: RequestInit = {}) => callApp(ENV, path, init);

async function post(path: string, req: SignedRequest) {
  const res = await call(path, { method: "POST", headers: req.headers, body: req.body });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

async function rpc<T>(method: string, params: unknown): Promise<T> {
  const res = await call(`/rpc/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return ((await res.json()) as { payload: T }).payload;
}

async function history(key: string): Promise<TranscriptMessage[]> {
  return (await rpc<{ messages: TranscriptMessage[] }>("chat.history", { sessionKey: key, limit: 50 }))
    .messages;
}

/** A Telegram private message from `from` with `extra` fields (a photo, a voice note, a document). */
async function sendTelegram(from: number, extra: Record<string, unknown>, caption?: string) {
  const key = `agent:main:telegram:dm:${from}`;
  await changeActorEnv(key, { config: CONFIG, vars: VARS });
  const update = telegramUpdate({ from, text: "" }) as { message: Record<string, unknown> };
  delete update.message.text;
  Object.assign(update.message, extra, caption ? { caption } : {});
  const res = await post("/connectors/telegram", telegramRequest(update, VARS.TELEGRAM_WEBHOOK_SECRET));
  expect(res.status).toBe(200);
  return key;
}

const sentTexts = () => telegram.posted().map((c) => String(c.body.text));
const lastUser = () =>
  completions
    .at(-1)
    ?.messages.filter((m) => m.role === "user")
    .at(-1)?.content as string | Array<{ type: string; text?: string; image_url?: { url: string } }>;

describe("media in", () => {
  it("a Telegram photo reaches a model that sees as an image, is kept in R2 and served to the operator", async () => {
    const jpeg = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5, 6]);
    telegram.files.set("photo-big", { data: jpeg, mimeType: "image/jpeg" });
    const key = await sendTelegram(
      5101,
      {
        photo: [
          { file_id: "photo-small", file_size: 3, width: 90, height: 90 },
          { file_id: "photo-big", file_size: jpeg.byteLength, width: 800, height: 800 },
        ],
      },
      "what is this?",
    );
    await eventually(async () => sentTexts().includes("got it"));
    await drain(key);

    // The model got the caption and the largest size as image input.
    const content = lastUser();
    expect(Array.isArray(content)).toBe(true);
    const parts = content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(parts[0]).toEqual({ type: "text", text: "what is this?" });
    expect(parts[1]?.type).toBe("image_url");
    expect(parts[1]?.image_url?.url).toBe(`data:image/jpeg;base64,${btoa(String.fromCharCode(...jpeg))}`);

    // The transcript keeps the part; the file is in R2 and served with the operator token only.
    const user = (await history(key)).find((m) => m.role === "user");
    const image = user?.content.find((p) => p.type === "image");
    expect(image).toMatchObject({
      type: "image",
      mimeType: "image/jpeg",
      bytes: jpeg.byteLength,
      name: "photo.jpg",
    });
    const mediaId = (image as { mediaId: string }).mediaId;
    const served = await call(`/v1/media/${mediaId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(served.status).toBe(200);
    expect(served.headers.get("content-type")).toBe("image/jpeg");
    expect(new Uint8Array(await served.arrayBuffer())).toEqual(jpeg);
    expect((await call(`/v1/media/${mediaId}`)).status).toBe(401);
    expect(
      (await call(`/v1/media/not-an-id`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(404);

    // The dashboard shows it in the transcript, from its own route behind the login.
    const login = await call("/ui/login", {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://gw.test" },
      body: new URLSearchParams({ token: TOKEN, next: "/ui/sessions" }).toString(),
    });
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const page = await (
      await call(`/ui/session?key=${encodeURIComponent(key)}`, { headers: { cookie } })
    ).text();
    expect(page).toContain(`<img src="/ui/media/${mediaId}" alt="photo.jpg"`);
    const shown = await call(`/ui/media/${mediaId}`, { headers: { cookie } });
    expect(shown.status).toBe(200);
    expect(new Uint8Array(await shown.arrayBuffer())).toEqual(jpeg);
    expect((await call(`/ui/media/${mediaId}`, { redirect: "manual" })).status).toBe(303);
  });

  it("a voice note is transcribed, and the transcript is the user message", async () => {
    telegram.files.set("voice-1", { data: new Uint8Array(300).fill(7), mimeType: "audio/ogg" });
    const key = await sendTelegram(5102, {
      voice: { file_id: "voice-1", mime_type: "audio/ogg", file_size: 300, duration: 2 },
    });
    await eventually(async () => sentTexts().includes("got it"));
    await drain(key);
    expect(transcriptions).toBe(1);
    expect(lastUser()).toBe("[voice note] hello from a voice note");
    const user = (await history(key)).find((m) => m.role === "user");
    expect(user?.content).toEqual([
      { type: "text", text: "[voice note] hello from a voice note" },
      expect.objectContaining({
        type: "audio",
        mimeType: "audio/ogg",
        bytes: 300,
        transcript: "hello from a voice note",
      }),
    ]);
  });

  it("a text document is given to the model inline", async () => {
    const text = "line one\nline two";
    telegram.files.set("doc-1", { data: new TextEncoder().encode(text), mimeType: "text/plain" });
    const key = await sendTelegram(
      5103,
      {
        document: {
          file_id: "doc-1",
          file_name: "notes.txt",
          mime_type: "text/plain",
          file_size: text.length,
        },
      },
      "summarize",
    );
    await eventually(async () => sentTexts().includes("got it"));
    await drain(key);
    expect(lastUser()).toEqual([
      { type: "text", text: "summarize" },
      { type: "text", text: `[file: notes.txt, text/plain, 1 KB]\n${text}` },
    ]);
  });

  it("a file past media.maxBytes gets one notice and no run", async () => {
    const key = await sendTelegram(5104, {
      document: {
        file_id: "doc-big",
        file_name: "big.pdf",
        mime_type: "application/pdf",
        file_size: MAX_BYTES + 1,
      },
    });
    await eventually(async () => sentTexts().some((t) => t.includes("too large")));
    expect(sentTexts().filter((t) => t.includes("too large"))).toEqual([
      `⚠️ "big.pdf" is too large (0.0 MB; the limit is 0.0 MB), so it was not passed on. Send a smaller one, or its text.`,
    ]);
    expect(completions).toHaveLength(0);
    expect(telegram.calls.some((c) => c.path.endsWith("/getFile"))).toBe(false);
    expect(
      (
        await call(`/rpc/sessions.get`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ key }),
        })
      ).status,
    ).toBe(404);
  });

  it("the bridge's https attachment is fetched and kept; deleting the session with its transcript removes it", async () => {
    files.set("https://files.test/report.txt", "quarterly numbers");
    const key = "agent:main:bridge:dm:ann";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const raw = JSON.stringify({
      messageId: "b-1",
      chatType: "direct",
      from: "ann",
      text: "see attached",
      attachments: [{ url: "https://files.test/report.txt", mimeType: "text/plain", name: "report.txt" }],
    });
    const res = await call("/hooks/inbound/bridge", await signedInbound(raw));
    expect(res.status).toBe(202);
    await eventually(async () => completions.length === 1);
    await drain(key);
    expect(lastUser()).toEqual([
      { type: "text", text: "see attached" },
      { type: "text", text: "[file: report.txt, text/plain, 1 KB]\nquarterly numbers" },
    ]);
    const part = (await history(key)).find((m) => m.role === "user")?.content.find((p) => p.type === "file");
    const mediaId = (part as { mediaId: string }).mediaId;
    const auth = { headers: { authorization: `Bearer ${TOKEN}` } };
    expect((await call(`/v1/media/${mediaId}`, auth)).status).toBe(200);

    expect(
      (await rpc<{ ok?: boolean }>("sessions.delete", { key, deleteTranscript: true })) !== undefined,
    ).toBe(true);
    await eventually(async () => (await call(`/v1/media/${mediaId}`, auth)).status === 404);
  });

  it("a run that crashes after its files were fetched does not fetch or transcribe them again", async () => {
    telegram.files.set("voice-crash", { data: new Uint8Array(200).fill(3), mimeType: "audio/ogg" });
    holdModel = true;
    const key = await sendTelegram(5105, {
      voice: { file_id: "voice-crash", mime_type: "audio/ogg", file_size: 200, duration: 1 },
    });
    // fetched (and checkpointed), started, and its model call under way: the process dies.
    await eventually(async () => completions.length === 1);
    epoch++;
    await abortAllDurableObjects();
    holdModel = false;
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    await runDurableObjectAlarm(actor(key));
    await eventually(async () => sentTexts().includes("got it"));
    await drain(key);
    expect(telegram.calls.filter((c) => c.path.endsWith("/getFile"))).toHaveLength(1);
    expect(transcriptions).toBe(1);
    expect(sentTexts().filter((t) => t === "got it")).toHaveLength(1);
    expect(lastUser()).toBe("[voice note] hello from a voice note");
    const users = (await history(key)).filter((m) => m.role === "user");
    expect(users).toHaveLength(1);
    expect(users[0]?.content[1]).toMatchObject({ type: "audio", transcript: "hello from a voice note" });
  });

  it("a Slack file is fetched from its private URL with the bot token, never from another host", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 9, 9]);
    slack.files.set("F1/chart.png", { data: png, mimeType: "image/png" });
    // Session keys are lower case (session.caseSensitiveChannels aside).
    const key = "agent:main:slack:dm:u0ann";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const event = slackEvent({ user: "U0ANN", channel: "D0ANN", text: "" }) as {
      event: Record<string, unknown>;
    };
    event.event.subtype = "file_share";
    event.event.files = [
      {
        name: "chart.png",
        mimetype: "image/png",
        size: png.byteLength,
        url_private_download: `${BASES.slack}/files-pri/F1/chart.png`,
      },
      // Another host is never sent the bot token: the file becomes a line.
      {
        name: "elsewhere.png",
        mimetype: "image/png",
        size: 3,
        url_private_download: "https://evil.test/x.png",
      },
    ];
    const res = await post("/connectors/slack", await slackRequest(event, VARS.SLACK_SIGNING_SECRET));
    expect(res.status).toBe(200);
    await eventually(async () => completions.length === 1);
    await drain(key);
    const content = lastUser() as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(content.map((p) => p.type)).toEqual(["text", "image_url"]);
    expect(content[0]?.text).toContain(
      "[image: elsewhere.png — not available: a Slack file is fetched from Slack's own host only",
    );
    expect(content[1]?.image_url?.url).toBe(`data:image/png;base64,${btoa(String.fromCharCode(...png))}`);
    const download = slack.calls.find((c) => c.path === "/files-pri/F1/chart.png");
    expect(download?.headers.authorization).toBe(`Bearer ${VARS.SLACK_BOT_TOKEN}`);
  });
  it("a Discord attachment is fetched from its URL, reaches the model as an image, and the reply comes back", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 7, 7, 7]);
    discord.files.set("9001/cat.png", { data: png, mimeType: "image/png" });
    const key = "agent:main:discord:dm:1600000000000000901";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const interaction = discordCommand({
      applicationId: APP_ID,
      user: "1600000000000000901",
      text: "",
      channelId: "1700000000000000901",
      attachment: {
        id: "9001",
        filename: "cat.png",
        size: png.byteLength,
        url: `${BASES.discord}/attachments/9001/cat.png`,
        content_type: "image/png",
      },
    });
    const res = await post("/connectors/discord", await discordRequest(interaction));
    expect(res.json).toEqual({ type: 5 });
    await eventually(async () => discord.shown().includes("got it"));
    await drain(key);
    const content = lastUser() as Array<{ type: string; image_url?: { url: string } }>;
    expect(content.map((p) => p.type)).toEqual(["image_url"]);
    expect(content[0]?.image_url?.url).toBe(`data:image/png;base64,${btoa(String.fromCharCode(...png))}`);
    const user = (await history(key)).find((m) => m.role === "user");
    expect(user?.content.find((p) => p.type === "image")).toMatchObject({
      name: "cat.png",
      bytes: png.byteLength,
    });
  });

  it("a WhatsApp image and voice note are fetched by media id with the access token", async () => {
    const jpeg = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 9, 9]);
    whatsapp.media.set("wa-img-1", { data: jpeg, mimeType: "image/jpeg" });
    whatsapp.media.set("wa-voice-1", { data: new Uint8Array(120).fill(5), mimeType: "audio/ogg" });
    const key = "agent:main:whatsapp:dm:15550001234";
    await changeActorEnv(key, { config: CONFIG, vars: VARS });
    const image = whatsappNotification({
      phoneNumberId: PHONE,
      from: "15550001234",
      type: "image",
      media: { id: "wa-img-1", mime_type: "image/jpeg", caption: "what is this?" },
    });
    expect(
      (await post("/connectors/whatsapp", await whatsappRequest(image, VARS.WHATSAPP_APP_SECRET))).status,
    ).toBe(200);
    await eventually(async () => whatsapp.shown().includes("got it"));
    await drain(key);
    const content = lastUser() as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(content[0]).toEqual({ type: "text", text: "what is this?" });
    expect(content[1]?.image_url?.url).toBe(`data:image/jpeg;base64,${btoa(String.fromCharCode(...jpeg))}`);
    const fetched = whatsapp.calls.filter(
      (c) => c.path === "/wa-img-1" || c.path === "/media-download/wa-img-1",
    );
    // Its size asked at the webhook, its URL by the run, then the download: each with the token.
    expect(fetched.map((c) => [c.path, c.headers.authorization])).toEqual([
      ["/wa-img-1", `Bearer ${VARS.WHATSAPP_ACCESS_TOKEN}`],
      ["/wa-img-1", `Bearer ${VARS.WHATSAPP_ACCESS_TOKEN}`],
      ["/media-download/wa-img-1", `Bearer ${VARS.WHATSAPP_ACCESS_TOKEN}`],
    ]);

    const voice = whatsappNotification({
      phoneNumberId: PHONE,
      from: "15550001234",
      type: "audio",
      media: { id: "wa-voice-1", mime_type: "audio/ogg", voice: true },
    });
    await post("/connectors/whatsapp", await whatsappRequest(voice, VARS.WHATSAPP_APP_SECRET));
    await eventually(async () => completions.length === 2);
    await drain(key);
    expect(lastUser()).toBe("[voice note] hello from a voice note");
    expect(whatsapp.shown().filter((t) => t.includes("only text"))).toEqual([]);
  });

  it("a Slack file, a Discord attachment, a WhatsApp document and a bridge attachment past media.maxBytes get one notice and no run", async () => {
    const slackKey = "agent:main:slack:dm:u0big";
    const discordKey = "agent:main:discord:dm:1600000000000000902";
    const bridgeKey = "agent:main:bridge:dm:bigfile";
    const whatsappKey = "agent:main:whatsapp:dm:15550009090";
    for (const key of [slackKey, discordKey, bridgeKey, whatsappKey])
      await changeActorEnv(key, { config: CONFIG, vars: VARS });
    // WhatsApp's webhook does not size a file: the gateway asks the Graph API (GET /<media id>).
    whatsapp.media.set("wa-huge", { data: new Uint8Array(MAX_BYTES + 1), mimeType: "application/pdf" });
    const document = whatsappNotification({
      phoneNumberId: PHONE,
      from: "15550009090",
      type: "document",
      media: { id: "wa-huge", mime_type: "application/pdf", filename: "huge.pdf" },
    });
    await post("/connectors/whatsapp", await whatsappRequest(document, VARS.WHATSAPP_APP_SECRET));
    const event = slackEvent({ user: "U0BIG", channel: "D0BIG", text: "" }) as {
      event: Record<string, unknown>;
    };
    event.event.subtype = "file_share";
    event.event.files = [
      {
        name: "huge.zip",
        mimetype: "application/zip",
        size: MAX_BYTES + 1,
        url_private_download: `${BASES.slack}/files-pri/huge.zip`,
      },
    ];
    await post("/connectors/slack", await slackRequest(event, VARS.SLACK_SIGNING_SECRET));
    const interaction = discordCommand({
      applicationId: APP_ID,
      user: "1600000000000000902",
      text: "",
      channelId: "1700000000000000902",
      attachment: {
        id: "9002",
        filename: "huge.mov",
        size: MAX_BYTES + 1,
        url: `${BASES.discord}/attachments/9002/huge.mov`,
      },
    });
    await post("/connectors/discord", await discordRequest(interaction));
    const raw = JSON.stringify({
      messageId: "b-big-1",
      chatType: "direct",
      from: "bigfile",
      text: "",
      attachments: [
        {
          url: "https://files.test/huge.bin",
          mimeType: "application/octet-stream",
          name: "huge.bin",
          bytes: MAX_BYTES + 1,
        },
      ],
    });
    const res = await call("/hooks/inbound/bridge", await signedInbound(raw));
    expect(res.status).toBeLessThan(300);
    const tooLarge = (name: string) => (t: string) => t.startsWith(`⚠️ "${name}" is too large`);
    await eventually(
      async () =>
        slack.shown().some(tooLarge("huge.zip")) &&
        discord.shown().some(tooLarge("huge.mov")) &&
        whatsapp.shown().some(tooLarge("huge.pdf")) &&
        bridged.some((b) => tooLarge("huge.bin")(String(b.text))),
    );
    expect(whatsapp.shown().filter(tooLarge("huge.pdf"))).toHaveLength(1);
    expect(whatsapp.calls.some((c) => c.path.startsWith("/media-download/"))).toBe(false);
    expect(slack.shown().filter(tooLarge("huge.zip"))).toHaveLength(1);
    expect(discord.shown().filter(tooLarge("huge.mov"))).toHaveLength(1);
    expect(bridged.filter((b) => tooLarge("huge.bin")(String(b.text)))).toHaveLength(1);
    expect(completions).toHaveLength(0);
    expect(slack.calls.some((c) => c.path.startsWith("/files-pri/"))).toBe(false);
    expect(discord.calls.some((c) => c.path.startsWith("/attachments/"))).toBe(false);
  });
  it("a photo given to a model that sees costs one R2 put (its run's fetch) and one R2 get (its model call)", async () => {
    const jpeg = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 4, 4, 4]);
    telegram.files.set("photo-ops", { data: jpeg, mimeType: "image/jpeg" });
    const ops: string[] = [];
    const bucket = env.MEDIA;
    const counting = recorded(bucket, (method) => ops.push(method));
    const key = "agent:main:telegram:dm:5199";
    await changeActorEnv(key, { config: CONFIG, vars: { ...VARS, MEDIA: counting } });
    const update = telegramUpdate({ from: 5199, text: "" }) as { message: Record<string, unknown> };
    delete update.message.text;
    update.message.photo = [{ file_id: "photo-ops", file_size: jpeg.byteLength, width: 10, height: 10 }];
    await post("/connectors/telegram", telegramRequest(update, VARS.TELEGRAM_WEBHOOK_SECRET));
    await eventually(async () => sentTexts().includes("got it"));
    await drain(key);
    // The numbers bench/capacity-model.ts prices a file at (npm run capacity's cost table).
    expect(ops.sort()).toEqual(["get", "put"]);
  });
});
