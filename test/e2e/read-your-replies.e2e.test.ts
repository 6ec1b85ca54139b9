/**
 * Read your replies (SPEC §17, with §19's writing behind): once a run's reply has reached its
 * connector, every read surface shows that run's messages (tool calls and results included) and
 * the entry fields it changed; a command's effect is readable once its acknowledgement or
 * greeting was delivered.
 *
 * Each test reads the gateway from inside the fake connector while the gateway's POST of the
 * delivery is still open (`connector.onDelivery`: the connector answers only once the reads are
 * done), so what a chat could do the moment it got its reply is what the test does: no waiting
 * for the run, no sleeps, no polling. The same reads are made again once `agent.wait` has
 * answered the run as ended, and asserted first, so a failure at the delivery is a stale read,
 * not a wrong expectation.
 *
 * Surfaces: `chat.history`, `sessions_history` (POST /tools/invoke), `runs.get`, the transcript
 * export, the dashboard's session page, `sessions.get`, `sessions.list`, and transcript search
 * (`sessions.search`, `sessions_search`), whose hits reopen with `chat.history`'s `aroundSeq`.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type DeliveryBody, type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { type FakeModel, startFakeModel } from "./support/fake-model.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
  directMessage,
  GATEWAY_TOKEN,
  type Gateway,
  invokeTool,
  startGateway,
} from "./support/gateway.ts";

const MODEL = "fake/model-1";
const OTHER_MODEL = "fake/model-2";
const OWNER = "rr-owner";
/** How long a delivery may take to reach the connector once its message was accepted. */
const DELIVERY_WITHIN_MS = 30_000;

let gw: Gateway;
let connector: FakeConnector;
let model: FakeModel;
/** The dashboard's login cookie (`name=value`). */
let dashboardCookie: string;

beforeAll(async () => {
  [connector, model] = await Promise.all([startFakeConnector(CONNECTOR_SECRET), startFakeModel()]);
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-peer" },
      agents: { defaults: { model: MODEL } },
      models: {
        providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } },
        retry: { attempts: 1, baseDelayMs: 1 },
      },
      tools: { sessions: { visibility: "all" } },
      commands: { owners: [`telegram:${OWNER}`] },
    },
  });
  model.setFallback({ text: "noted" });
  dashboardCookie = await dashboardLogin();
});

afterEach(() => {
  // A hook that threw is a failure of the test that set it, never a swallowed error.
  const thrown = connector?.hookErrors.splice(0).map((e) => e.attempt.hookError);
  connector?.onDelivery(undefined);
  model?.reset();
  model?.setFallback({ text: "noted" });
  expect(thrown ?? [], "errors thrown by the connector's onDelivery hook").toEqual([]);
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close()]);
});

// ---------------------------------------------------------------------------------------------
// Helpers

interface Message {
  role: string;
  content: Array<{ type: string; text?: string; name?: string }>;
  toolName?: string;
  runId?: string;
}

interface Entry {
  key: string;
  sessionId: string;
  model?: string;
  modelOverride?: string;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  sendPolicy?: string;
}

/** One line per message: its role and what it says or calls, for readable diffs. */
function summary(m: Message): string {
  const parts = m.content.map((p) =>
    p.type === "text" ? (p.text ?? "") : p.type === "toolCall" ? `call ${p.name}` : p.type,
  );
  return `${m.role}${m.toolName ? ` ${m.toolName}` : ""}: ${parts.join(" ")}`;
}

let peers = 0;
let messageIds = 0;

/** A direct chat of its own for each test (its session key, under dmScope per-peer). */
function newPeer(): { peer: string; key: string } {
  const peer = `rr-${++peers}`;
  return { peer, key: `agent:main:dm:${peer}` };
}

async function say(peer: string, text: string) {
  const messageId = `rr-msg-${++messageIds}`;
  const ack = await gw.inbound("telegram", directMessage({ messageId, from: peer, text }));
  expect(ack.status, JSON.stringify(ack.body)).toBe(202);
  return { ...ack.body, messageId } as {
    runId: string;
    sessionKey: string;
    sessionId: string;
    status: string;
    messageId: string;
  };
}

/** Waits server-side for the run to end: once it answers, every surface shows the run. */
async function ended(runId: string): Promise<void> {
  const wait = await gw.call<{ status: string; error?: string }>("agent.wait", { runId, timeoutMs: 30_000 });
  expect(wait, `run ${runId}`).toMatchObject({ status: "ok" });
}

/** A first turn, so the session is in D1 with one run behind it before the turn under test. */
async function warmUp(peer: string): Promise<{ sessionId: string }> {
  const first = await say(peer, "hello");
  await ended(first.runId);
  return { sessionId: first.sessionId };
}

/**
 * Arms the connector: the first delivery `match` accepts runs `read` (the reads of the gateway)
 * before the connector answers the gateway's POST. Resolves with what was read; rejects with the
 * read's error, or when no such delivery arrived within DELIVERY_WITHIN_MS.
 */
function readAtDelivery<T>(
  match: (body: DeliveryBody) => boolean,
  read: (body: DeliveryBody) => Promise<T>,
): Promise<T> {
  let settled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const seen = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => {
      settled = true;
      reject(new Error(`no matching delivery reached the connector within ${DELIVERY_WITHIN_MS}ms`));
    }, DELIVERY_WITHIN_MS);
    connector.onDelivery(async (body) => {
      if (settled || !match(body)) return;
      settled = true;
      try {
        resolve(await read(body));
      } catch (error) {
        reject(error);
      }
    });
  }).finally(() => {
    clearTimeout(timer);
    connector.onDelivery(undefined);
  });
  // Awaited by the test; until then a rejection is not unhandled.
  seen.catch(() => {});
  return seen;
}

/** An RPC's answer, or what went wrong: a read that fails is reported, not thrown mid-hook. */
type Read<T> = { ok: true; value: T } | { ok: false; error: string };

async function settle<T>(p: Promise<T>): Promise<Read<T>> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}

function readValue<T>(r: Read<T>, what: string): T {
  if (!r.ok) throw new Error(`${what} failed: ${r.error}`);
  return r.value;
}

/** What `surface` read after agent.wait and at the delivery both match `expected`. */
function expectBothMatch<T>(
  turn: { later: Read<T>; atDelivery: Read<T> },
  surface: string,
  expected: Record<string, unknown>,
): void {
  for (const [read, when] of [
    [turn.later, "after agent.wait"],
    [turn.atDelivery, "at the delivery"],
  ] as const) {
    expect(readValue(read, `${surface} ${when}`), `${surface} ${when}`).toMatchObject(expected);
  }
}

const invoke = (tool: string, args: Record<string, unknown>) => invokeTool(gw, tool, args);

/** The transcript export's message lines. */
async function exportedMessages(sessionId: string): Promise<Message[]> {
  const res = await gw.fetch(`/v1/transcripts/${sessionId}.jsonl`, {
    headers: { authorization: `Bearer ${GATEWAY_TOKEN}` },
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`the export answered ${res.status}: ${text.slice(0, 300)}`);
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string; message?: Message })
    .flatMap((line) => (line.type === "message" && line.message ? [line.message] : []));
}

/** The `sessions.list` row of `key` (undefined when the listing does not have it). */
async function listed(key: string) {
  const list = await gw.call<{ sessions: Array<{ key: string; sessionId: string; model: string | null }> }>(
    "sessions.list",
    { limit: 200 },
  );
  return list.sessions.find((s) => s.key === key);
}

/** Logs in to the dashboard with the operator token; returns the login cookie. */
async function dashboardLogin(): Promise<string> {
  const res = await gw.fetch("/ui/login", {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: gw.url },
    body: new URLSearchParams({ token: GATEWAY_TOKEN, next: "/ui/sessions" }).toString(),
  });
  expect(res.status, await res.clone().text()).toBe(303);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  expect(cookie).toMatch(/^switchboard_ui=/);
  return cookie;
}

/**
 * The transcript the dashboard's session page shows: one line per message, its role and its
 * text (tags stripped, the message's header left out).
 */
async function dashboardTranscript(key: string): Promise<string[]> {
  const res = await gw.fetch(`/ui/session?${new URLSearchParams({ key })}`, {
    headers: { cookie: dashboardCookie },
    redirect: "manual",
  });
  const html = await res.text();
  if (res.status !== 200) throw new Error(`/ui/session answered ${res.status}: ${html.slice(0, 300)}`);
  return html
    .split('<article class="msg ')
    .slice(1)
    .map((article) => {
      const role = article.slice(0, article.search(/[\s"]/));
      const open = article.indexOf(">") + 1;
      const body = article
        .slice(open, article.indexOf("</article>"))
        .replace(/<header>[\s\S]*?<\/header>/, "")
        .replace(/<[^>]*>/g, " ")
        .replace(/\s+/g, " ")
        .trim();
      return `${role}: ${body}`;
    });
}

/** The turn under test, as a read at its delivery knows it (the delivery may come before its ack). */
interface Turn {
  key: string;
  /** The session's id: the warm-up's (the turn does not reset the session). */
  sessionId: string;
  /** From the delivery's id (`<runId>:reply`) at the delivery, from the ack later. */
  runId: string;
}

/**
 * A turn with a tool call: the model calls `current_time`, then answers `reply`. `read` runs at
 * the delivery of the reply and again once the run has ended; both are returned.
 */
async function toolTurn<T>(read: (turn: Turn) => Promise<T>) {
  const { peer, key } = newPeer();
  const { sessionId } = await warmUp(peer);
  const reply = `It is noon for ${peer}.`;
  model.push(
    {
      toolCalls: [{ id: `call_${peer}`, name: "current_time", arguments: {} }],
      usage: { prompt: 20, completion: 4 },
    },
    { text: reply, usage: { prompt: 30, completion: 6 } },
  );
  let deliveryId: string | undefined;
  const seen = readAtDelivery(
    (b) => b.sessionKey === key && b.text === reply,
    (b) => {
      deliveryId = b.deliveryId;
      return read({ key, sessionId, runId: b.deliveryId.replace(/:reply$/, "") });
    },
  );
  const ack = await say(peer, "what time is it? use the tool");
  const atDelivery = await seen;
  expect(ack.sessionId, "the turn's sessionId").toBe(sessionId);
  expect(deliveryId, "the reply's deliveryId").toBe(`${ack.runId}:reply`);
  await ended(ack.runId);
  const later = await read({ key, sessionId, runId: ack.runId });
  return { key, reply, runId: ack.runId, sessionId, atDelivery, later };
}

/** The session's messages after the tool turn (the warm-up's, then the turn's), in any surface that lists them. */
function expectedToolRun(reply: string): string[] {
  return [
    "user: hello",
    "assistant: noted",
    "user: what time is it? use the tool",
    "assistant: call current_time",
    expect.stringMatching(/^toolResult current_time: /) as unknown as string,
    `assistant: ${reply}`,
  ];
}

// ---------------------------------------------------------------------------------------------

describe("a turn with a tool call, read when its reply reaches the connector", () => {
  it("chat.history shows the tool call, the tool result and the reply", async () => {
    const turn = await toolTurn(async (t) =>
      settle(gw.call<{ sessionId: string; messages: Message[] }>("chat.history", { sessionKey: t.key })),
    );
    const expected = expectedToolRun(turn.reply);
    const later = readValue(turn.later, "chat.history after agent.wait");
    expect(later.messages.map(summary), "chat.history after agent.wait").toEqual(expected);
    expect(later.messages.slice(2).every((m) => m.runId === turn.runId)).toBe(true);
    const atDelivery = readValue(turn.atDelivery, "chat.history at the delivery");
    expect(atDelivery.messages.map(summary), "chat.history at the delivery of the reply").toEqual(expected);
  });

  it("sessions_history (includeTools, POST /tools/invoke) shows them too", async () => {
    const turn = await toolTurn(async (t) =>
      settle(invoke("sessions_history", { sessionKey: t.key, includeTools: true, limit: 50 })),
    );
    const expected = expectedToolRun(turn.reply);
    const later = readValue(turn.later, "sessions_history after agent.wait") as { messages: Message[] };
    expect(later.messages.map(summary), "sessions_history after agent.wait").toEqual(expected);
    const atDelivery = readValue(turn.atDelivery, "sessions_history at the delivery") as {
      messages: Message[];
    };
    expect(atDelivery.messages.map(summary), "sessions_history at the delivery of the reply").toEqual(
      expected,
    );
  });

  it("runs.get shows the run ended ok, with its reply", async () => {
    const turn = await toolTurn(async (t) =>
      settle(gw.call<{ status: string; reply?: string }>("runs.get", { runId: t.runId })),
    );
    const expected = { status: "ok", reply: turn.reply };
    expect(readValue(turn.later, "runs.get after agent.wait"), "runs.get after agent.wait").toMatchObject(
      expected,
    );
    expect(
      readValue(turn.atDelivery, "runs.get at the delivery"),
      "runs.get at the delivery of the reply",
    ).toMatchObject(expected);
  });

  it("the transcript export holds the tool result and the reply", async () => {
    const turn = await toolTurn(async (t) => settle(exportedMessages(t.sessionId)));
    const expected = expectedToolRun(turn.reply);
    expect(
      readValue(turn.later, "the export after agent.wait").map(summary),
      "the transcript export after agent.wait",
    ).toEqual(expected);
    expect(
      readValue(turn.atDelivery, "the export at the delivery").map(summary),
      "the transcript export at the delivery of the reply",
    ).toEqual(expected);
  });

  it("the dashboard's session page shows the reply", async () => {
    const turn = await toolTurn(async (t) => settle(dashboardTranscript(t.key)));
    const reply = `assistant: ${turn.reply}`;
    expect(readValue(turn.later, "/ui/session after agent.wait"), "/ui/session after agent.wait").toContain(
      reply,
    );
    expect(
      readValue(turn.atDelivery, "/ui/session at the delivery"),
      "/ui/session at the delivery of the reply",
    ).toContain(reply);
  });
});

/**
 * `/new fake/model-2` in a session that ran on MODEL: the greeting's run runs on the new model
 * under a new sessionId. `read` runs at the delivery of the greeting and again once it has ended.
 */
async function newModelTurn<T>(read: (key: string) => Promise<T>) {
  const { peer, key } = newPeer();
  const before = await warmUp(peer);
  const entry = await gw.call<Entry>("sessions.get", { key });
  expect(entry, "the session before /new").toMatchObject({ sessionId: before.sessionId, model: MODEL });
  const greeting = `Fresh start on model 2 for ${peer}.`;
  model.push({ text: greeting });
  const seen = readAtDelivery(
    (b) => b.sessionKey === key && b.text === greeting,
    () => read(key),
  );
  const ack = await say(peer, `/new ${OTHER_MODEL}`);
  expect(ack.status).toBe("command");
  expect(ack.sessionId).not.toBe(before.sessionId);
  const atDelivery = await seen;
  await ended(ack.runId);
  const later = await read(key);
  return { key, greeting, runId: ack.runId, sessionId: ack.sessionId, atDelivery, later };
}

describe("/new <model> and its greeting, read when the greeting reaches the connector", () => {
  it("sessions.get shows the new model and the new sessionId", async () => {
    const turn = await newModelTurn((key) => settle(gw.call<Entry>("sessions.get", { key })));
    const expected = { sessionId: turn.sessionId, model: OTHER_MODEL, modelOverride: OTHER_MODEL };
    expectBothMatch(turn, "sessions.get", expected);
  });

  it("sessions.list shows the new model and the new sessionId", async () => {
    const turn = await newModelTurn((key) => settle(listed(key)));
    const expected = { key: turn.key, sessionId: turn.sessionId, model: OTHER_MODEL };
    expectBothMatch(turn, "sessions.list", expected);
  });

  it("chat.history shows the new session's greeting", async () => {
    const turn = await newModelTurn((key) =>
      settle(gw.call<{ sessionId: string; messages: Message[] }>("chat.history", { sessionKey: key })),
    );
    const check = (history: { sessionId: string; messages: Message[] }, when: string) => {
      expect(history.sessionId, `chat.history ${when}: sessionId`).toBe(turn.sessionId);
      expect(
        history.messages.at(-1) && summary(history.messages.at(-1) as Message),
        `chat.history ${when}`,
      ).toBe(`assistant: ${turn.greeting}`);
    };
    check(readValue(turn.later, "chat.history after agent.wait"), "after agent.wait");
    check(readValue(turn.atDelivery, "chat.history at the delivery"), "at the delivery of the greeting");
  });
});

describe("the entry's token counters, read when a reply reaches the connector", () => {
  it("sessions.get counts the run's usage", async () => {
    const { peer, key } = newPeer();
    await warmUp(peer);
    const before = await gw.call<Entry>("sessions.get", { key });
    const reply = `Counted for ${peer}.`;
    model.push({ text: reply, usage: { prompt: 31, completion: 9 } });
    const read = () => settle(gw.call<Entry>("sessions.get", { key }));
    const seen = readAtDelivery((b) => b.sessionKey === key && b.text === reply, read);
    const ack = await say(peer, "count this");
    const atDelivery = await seen;
    await ended(ack.runId);
    const later = await read();
    const expected = {
      inputTokens: before.inputTokens + 31,
      outputTokens: before.outputTokens + 9,
      totalTokens: 31 + 9,
    };
    expect(readValue(later, "sessions.get after agent.wait"), "sessions.get after agent.wait").toMatchObject(
      expected,
    );
    expect(
      readValue(atDelivery, "sessions.get at the delivery"),
      "sessions.get at the delivery of the reply",
    ).toMatchObject(expected);
  });
});

describe("/send off, read when its notice reaches the connector", () => {
  it("sessions.get shows sendPolicy deny", async () => {
    // The owner's own chat (commands.owners names telegram:<OWNER>).
    const ownerKey = `agent:main:dm:${OWNER}`;
    await warmUp(OWNER);
    const notice = "Send policy: off (deny) for this session.";
    const read = () => settle(gw.call<Entry>("sessions.get", { key: ownerKey }));
    const seen = readAtDelivery(
      (b) => b.sessionKey === ownerKey && b.kind === "notice" && b.text === notice,
      read,
    );
    const ack = await say(OWNER, "/send off");
    expect(ack).toMatchObject({ status: "command", sessionKey: ownerKey });
    const atDelivery = await seen;
    // Read again once the notice has reached the connector.
    const later = await read();
    expect(readValue(later, "sessions.get after the notice"), "sessions.get after the notice").toMatchObject({
      sendPolicy: "deny",
    });
    expect(
      readValue(atDelivery, "sessions.get at the delivery"),
      "sessions.get at the delivery of the notice",
    ).toMatchObject({ sendPolicy: "deny" });
  });
});

interface SearchAnswer {
  count: number;
  results: Array<{ sessionKey: string; sessionId: string; seq: number; role: string; excerpt: string }>;
}

describe("transcript search, read when a reply reaches the connector", () => {
  it("sessions.search and sessions_search find the message and its reply; after a reset the hit reopens around its seq", async () => {
    const { peer, key } = newPeer();
    const { sessionId } = await warmUp(peer);
    const word = `quetzal${Date.now().toString(36)}`;
    model.setFallback({ text: `the ${word} flies` });
    const read = () =>
      Promise.all([
        settle(gw.call<SearchAnswer>("sessions.search", { query: word })),
        settle(invoke("sessions_search", { query: word }).then((r) => r as unknown as SearchAnswer)),
      ]);
    const seen = readAtDelivery((b) => b.sessionKey === key && b.kind === "reply", read);
    const ack = await say(peer, `have you seen a ${word}?`);
    const [rpcAtDelivery, toolAtDelivery] = await seen;
    await ended(ack.runId);
    for (const [found, what] of [
      [rpcAtDelivery, "sessions.search at the delivery"],
      [toolAtDelivery, "sessions_search at the delivery"],
    ] as const) {
      const answer = readValue(found, what);
      expect(answer.results.map((h) => h.role).sort(), what).toEqual(["assistant", "user"]);
      expect(
        answer.results.every((h) => h.sessionId === sessionId && h.excerpt.includes(`**${word}**`)),
      ).toBe(true);
    }
    // A query made of FTS5 syntax is text.
    for (const query of ['"', "NEAR(", `${word}*`, "-x", "a:b"]) {
      expect(await settle(gw.call<SearchAnswer>("sessions.search", { query })), query).toMatchObject({
        ok: true,
      });
    }

    // After a reset the hit is in the transcript from before it, and reopens there.
    await gw.call("sessions.reset", { key });
    const after = await gw.call<SearchAnswer>("sessions.search", { query: word, roles: ["user"] });
    const hit = after.results[0];
    expect(hit).toMatchObject({ sessionKey: key, sessionId, role: "user" });
    const page = await gw.call<{ sessionId: string; messages: Array<{ seq: number }>; hasNewer: boolean }>(
      "chat.history",
      { sessionKey: key, sessionId, aroundSeq: hit?.seq, limit: 2 },
    );
    expect(page.sessionId).toBe(sessionId);
    expect(page.messages.map((m) => m.seq)).toEqual([hit?.seq, (hit?.seq ?? 0) + 1]);
  });
});
