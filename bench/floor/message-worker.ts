/**
 * The platform floor of a message, for `npm run ab -- floor <new|existing>`: a bare Worker (same
 * compatibility date and flags as the gateway, none of its code) that does only what any
 * durable gateway of this shape must do per chat message, each step once, in its cheapest form,
 * with the same model request and the same D1 tables as the gateway:
 *
 * - Worker: `POST /hooks/inbound/telegram` reads the body, checks its HMAC signature (the
 *   bridge's `t=…,v1=…` header), parses it, and hands the message to the session's Durable
 *   Object (one RPC call), answering 202 with what it said.
 * - Durable Object (SQLite), before answering: a new session is registered in D1 first (its
 *   key's run-id prefix in `run_prefixes` and a read of any `sessions` row of the key, one
 *   batch: a run id handed out in the ack can be looked up), then the message is deduped by its
 *   id (kept after the run, as the gateway keeps its accepted ids) and stored in the queue, with
 *   an alarm as the backstop of a run its process loses.
 * - Then, in the background, in this order (SPEC §17, read your replies: D1 holds a reply
 *   before the chat sees it): one model call over HTTP, an OpenAI-compatible chat completion
 *   with the gateway's own system prompt, tool schemas and parameters (FLOOR_REQUEST, captured
 *   by bench/ab.ts from what the gateway sent its model) and
 *   the session's whole history, kept in the DO's SQLite; the two messages added to it; the
 *   turn's records in one D1 batch into the gateway's own tables (its migrations): the session's
 *   row, the run, the two messages, and the previous reply's delivery with its outcome, each one
 *   plain statement; the reply in an outbox row and one signed POST to the connector, whose
 *   outcome that row keeps for the session's next batch; the queue row removed, the alarm
 *   deleted. D1 round trips: 1 per message, 2 for a new session.
 *
 * No config, no policies, no compaction, no transcript reads from D1, no retries, no journal:
 * the gateway's CPU per message ÷ this one's is how far above the platform it runs on this host
 * (under `wrangler dev` the HTTP hops, the Durable Object call, the D1 simulator and DO SQLite
 * are workerd CPU too). `GET /healthz` answers like the gateway's. Never deployed.
 */
import { DurableObject } from "cloudflare:workers";

interface FloorEnv {
  DB: D1Database;
  FLOOR_SESSION: DurableObjectNamespace<FloorSession>;
  FLOOR_MODEL_URL: string;
  FLOOR_DELIVER_URL: string;
  CONNECTOR_SECRET: string;
  /**
   * What the gateway sends its model besides the messages (bench/workload.ts `floorRequestVar`:
   * base64 of `{ system, tools, params }`, the system prompt with `{sessionKey}` where it names
   * the session; base64 because the env file wrangler reads does not unescape quotes).
   */
  FLOOR_REQUEST?: string;
}

interface Message {
  sessionKey: string;
  messageId: string;
  runId: string;
  from: string;
  text: string;
  receivedAt: number;
}

/** The session as its Durable Object knows it (one row). */
interface Session {
  key: string;
  session_id: string;
  created_at: number;
  [column: string]: SqlStorageValue;
}

interface Completion {
  choices?: Array<{ message?: { content?: string | null } }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
}

const encoder = new TextEncoder();
let hmacKey: Promise<CryptoKey> | undefined;

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function hmac(secret: string, text: string): Promise<string> {
  hmacKey ??= crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return hex(await crypto.subtle.sign("HMAC", await hmacKey, encoder.encode(text)));
}

/** The bridge's signature header (`t=<seconds>,v1=<hex>`) checked against the body. */
async function verified(secret: string, header: string | null, body: string): Promise<boolean> {
  const t = /t=(\d+)/.exec(header ?? "")?.[1];
  const v1 = /v1=([0-9a-f]+)/.exec(header ?? "")?.[1];
  return !!t && !!v1 && (await hmac(secret, `${t}.${body}`)) === v1;
}

/** 32 bits of FNV-1a of `text` from `offset`, as 8 hex digits. */
function fnv(text: string, offset: number): string {
  let h = offset;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** The first 18 characters of every run id of a session: 64 bits naming its key. */
function runIdPrefix(key: string): string {
  const h = fnv(key, 0x811c9dc5) + fnv(key, 0x050c5d1f);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}`;
}

/** A run id (UUID-shaped) of the session `key`, stable for the same message. */
function runIdOf(key: string, messageId: string): string {
  const h = fnv(messageId, 0x811c9dc5) + fnv(messageId, 0x050c5d1f);
  return `${runIdPrefix(key)}-${h.slice(0, 4)}-${h.slice(4, 16)}`;
}

/** What the model request is made of besides the messages, read once per isolate. */
interface RequestParts {
  /** The system prompt around the session key. */
  system: [string, string];
  /** The JSON text after the messages array: the tools and the other fields. */
  tail: string;
  model: string;
}

let parts: RequestParts | undefined;

function requestParts(env: FloorEnv): RequestParts {
  if (parts) return parts;
  const bytes = Uint8Array.from(atob(env.FLOOR_REQUEST ?? ""), (c) => c.charCodeAt(0));
  const given = (bytes.length ? JSON.parse(new TextDecoder().decode(bytes)) : {}) as {
    system?: string;
    tools?: unknown[];
    params?: Record<string, unknown>;
  };
  const [before = "", ...after] = (given.system ?? "").split("{sessionKey}");
  const params = given.params ?? { model: "m" };
  const tools = given.tools?.length ? `,"tools":${JSON.stringify(given.tools)}` : "";
  const rest = JSON.stringify(params).slice(1);
  parts = {
    system: [before, after.join("{sessionKey}")],
    tail: `]${tools}${rest === "}" ? "}" : `,${rest}`}`,
    model: typeof params.model === "string" ? params.model : "m",
  };
  return parts;
}

const DDL = `CREATE TABLE IF NOT EXISTS session (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS received (message_id TEXT PRIMARY KEY, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS queue (run_id TEXT PRIMARY KEY, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (delivery_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, payload TEXT NOT NULL, created_at INTEGER NOT NULL, status TEXT, settled_at INTEGER);`;

const SESSION_SQL = `insert into sessions (key, agent_id, session_id, kind, chat_type, channel, created_at, updated_at,
  session_started_at, last_interaction_at, model, input_tokens, output_tokens, total_tokens, system_sent, last_channel,
  last_to, last_account_id, delivery_context, origin, run_status)
values (?1, 'main', ?2, 'other', 'direct', 'telegram', ?3, ?4, ?3, ?4, ?5, ?6, ?7, ?8, 1, 'telegram', ?9, 'default', ?10, ?11, 'idle')
on conflict (key) do update set updated_at = excluded.updated_at, last_interaction_at = excluded.last_interaction_at,
  input_tokens = sessions.input_tokens + excluded.input_tokens, output_tokens = sessions.output_tokens + excluded.output_tokens,
  total_tokens = excluded.total_tokens, run_status = excluded.run_status`;

const RUN_SQL = `insert into runs (run_id, session_key, session_id, trigger, status, created_at, started_at, ended_at, reply, usage, model, deliver)
values (?, ?, ?, 'inbound', 'ok', ?, ?, ?, ?, ?, ?, 1) on conflict do nothing`;

const MESSAGES_SQL = `insert or ignore into messages (session_id, seq, id, role, content, timestamp, run_id, model, usage, provenance)
values (?1, ?2, ?3, 'user', ?4, ?5, ?6, null, null, '{"kind":"external_user","sourceChannel":"telegram"}'),
  (?1, ?7, ?8, 'assistant', ?9, ?10, ?6, ?11, ?12, null)`;

const DELIVERY_SQL = `insert into deliveries (delivery_id, kind, session_key, run_id, channel, account_id, "to", reply_to_message_id,
  text, status, attempts, created_at, updated_at, delivered_at)
values (?, 'reply', ?, ?, 'telegram', 'default', ?, ?, ?, ?, 1, ?, ?, ?)
on conflict (delivery_id) do update set status = excluded.status, attempts = excluded.attempts,
  updated_at = excluded.updated_at, delivered_at = excluded.delivered_at`;

export class FloorSession extends DurableObject<FloorEnv> {
  private readonly sql = this.ctx.storage.sql;
  private chain: Promise<void> = Promise.resolve();
  private session: Session | undefined;
  private binding: Promise<Session> | undefined;
  /** The system message of this session's requests (JSON). */
  private system: string | undefined;

  constructor(ctx: DurableObjectState, env: FloorEnv) {
    super(ctx, env);
    this.sql.exec(DDL);
    this.session = this.sql.exec<Session>("SELECT key, session_id, created_at FROM session").toArray()[0];
  }

  /**
   * A new session registered in D1 before its first ack: its key's run-id prefix (so the run id
   * the ack hands out can be looked up) and any row D1 holds for the key, in one batch.
   */
  private async bind(key: string): Promise<Session> {
    const db = this.env.DB;
    const [, found] = await db.batch<{ session_id: string; created_at: number }>([
      db
        .prepare("insert into run_prefixes (prefix, session_key) values (?, ?) on conflict do nothing")
        .bind(runIdPrefix(key), key),
      db.prepare("select session_id, created_at from sessions where key = ? limit 1").bind(key),
    ]);
    const row = found?.results[0];
    const session: Session = {
      key,
      session_id: row?.session_id ?? crypto.randomUUID(),
      created_at: row?.created_at ?? Date.now(),
    };
    this.sql.exec(
      "INSERT INTO session (key, session_id, created_at) VALUES (?, ?, ?)",
      session.key,
      session.session_id,
      session.created_at,
    );
    return session;
  }

  async enqueue(m: Message): Promise<{ runId: string; status: "queued" | "duplicate" }> {
    if (!this.session) {
      this.binding ??= this.bind(m.sessionKey).finally(() => {
        this.binding = undefined;
      });
      this.session = await this.binding;
    }
    const added = this.sql
      .exec(
        "INSERT OR IGNORE INTO received (message_id, at) VALUES (?, ?) RETURNING message_id",
        m.messageId,
        m.receivedAt,
      )
      .toArray().length;
    if (!added) return { runId: m.runId, status: "duplicate" };
    this.sql.exec("INSERT INTO queue (run_id, message) VALUES (?, ?)", m.runId, JSON.stringify(m));
    await this.ctx.storage.setAlarm(Date.now() + 10_000);
    this.chain = this.chain.then(() => this.run(m)).catch((error) => console.error(`floor run: ${error}`));
    return { runId: m.runId, status: "queued" };
  }

  /** The backstop: runs what a lost process left in the queue. */
  override async alarm(): Promise<void> {
    for (const row of this.sql.exec<{ message: string }>("SELECT message FROM queue").toArray())
      await this.run(JSON.parse(row.message) as Message);
  }

  private async run(m: Message): Promise<void> {
    const session = this.session;
    if (!session) throw new Error("a run before its session was registered");
    const startedAt = Date.now();
    const request = requestParts(this.env);
    this.system ??= JSON.stringify({
      role: "system",
      content: `${request.system[0]}${m.sessionKey}${request.system[1]}`,
    });
    // The session's history: every earlier message, as sent to the model.
    const history = this.sql
      .exec<{ seq: number; message: string }>("SELECT seq, message FROM history ORDER BY seq")
      .toArray();
    const user = JSON.stringify({ role: "user", content: m.text });
    let messages = this.system;
    for (const h of history) messages += `,${h.message}`;
    const res = await fetch(`${this.env.FLOOR_MODEL_URL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"messages":[${messages},${user}${request.tail}`,
    });
    const completion = (await res.json()) as Completion;
    const reply = completion.choices?.[0]?.message?.content ?? "";
    const usage = completion.usage ?? {};
    const endedAt = Date.now();
    const seq = (history.at(-1)?.seq ?? 0) + 1;
    this.sql.exec(
      "INSERT INTO history (seq, message) VALUES (?, ?), (?, ?)",
      seq,
      user,
      seq + 1,
      JSON.stringify({ role: "assistant", content: reply }),
    );

    // The turn's records, in one batch, before the chat sees the reply.
    const db = this.env.DB;
    const deliveryId = `${m.runId}:reply`;
    const payload = JSON.stringify({
      deliveryId,
      kind: "reply",
      sessionKey: m.sessionKey,
      channel: "telegram",
      accountId: "default",
      to: m.from,
      text: reply,
      replyToMessageId: m.messageId,
    });
    const usageText = JSON.stringify({
      inputTokens: usage.prompt_tokens ?? 0,
      outputTokens: usage.completion_tokens ?? 0,
      totalTokens: usage.total_tokens ?? 0,
    });
    const statements = [
      db
        .prepare(SESSION_SQL)
        .bind(
          m.sessionKey,
          session.session_id,
          session.created_at,
          endedAt,
          request.model,
          usage.prompt_tokens ?? 0,
          usage.completion_tokens ?? 0,
          usage.total_tokens ?? 0,
          m.from,
          JSON.stringify({ channel: "telegram", to: m.from, accountId: "default" }),
          JSON.stringify({ provider: "telegram", from: m.from, to: "bot", accountId: "default" }),
        ),
      db
        .prepare(RUN_SQL)
        .bind(
          m.runId,
          m.sessionKey,
          session.session_id,
          m.receivedAt,
          startedAt,
          endedAt,
          reply,
          usageText,
          request.model,
        ),
      db
        .prepare(MESSAGES_SQL)
        .bind(
          session.session_id,
          seq,
          `${m.runId}:u0`,
          JSON.stringify([{ type: "text", text: m.text }]),
          m.receivedAt,
          m.runId,
          seq + 1,
          `${m.runId}:s0:a`,
          JSON.stringify([{ type: "text", text: reply }]),
          endedAt,
          request.model,
          usageText,
        ),
    ];
    // The earlier replies' outcomes, kept in the outbox until this batch carries them.
    const settled = this.sql
      .exec<{
        delivery_id: string;
        run_id: string;
        payload: string;
        created_at: number;
        status: string;
        settled_at: number;
      }>(
        "SELECT delivery_id, run_id, payload, created_at, status, settled_at FROM outbox WHERE status IS NOT NULL",
      )
      .toArray();
    for (const d of settled) {
      const p = JSON.parse(d.payload) as {
        sessionKey: string;
        to: string;
        replyToMessageId: string;
        text: string;
      };
      statements.push(
        db
          .prepare(DELIVERY_SQL)
          .bind(
            d.delivery_id,
            p.sessionKey,
            d.run_id,
            p.to,
            p.replyToMessageId,
            p.text,
            d.status,
            d.created_at,
            d.settled_at,
            d.status === "delivered" ? d.settled_at : null,
          ),
      );
    }
    await db.batch(statements);
    for (const d of settled) this.sql.exec("DELETE FROM outbox WHERE delivery_id = ?", d.delivery_id);

    // The reply: durable in the outbox, posted once, its outcome kept for the next batch.
    const createdAt = Date.now();
    this.sql.exec(
      "INSERT OR REPLACE INTO outbox (delivery_id, run_id, payload, created_at) VALUES (?, ?, ?, ?)",
      deliveryId,
      m.runId,
      payload,
      createdAt,
    );
    const t = Math.floor(createdAt / 1000);
    const posted = await fetch(this.env.FLOOR_DELIVER_URL, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-switchboard-signature": `t=${t},v1=${await hmac(this.env.CONNECTOR_SECRET, `${t}.${payload}`)}`,
      },
      body: payload,
    });
    await posted.arrayBuffer();
    this.sql.exec(
      "UPDATE outbox SET status = ?, settled_at = ? WHERE delivery_id = ?",
      posted.ok ? "delivered" : "pending",
      Date.now(),
      deliveryId,
    );
    this.sql.exec("DELETE FROM queue WHERE run_id = ?", m.runId);
    if (!this.sql.exec("SELECT 1 FROM queue LIMIT 1").toArray().length) await this.ctx.storage.deleteAlarm();
  }
}

export default {
  async fetch(request: Request, env: FloorEnv): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/healthz")
      return Response.json({ ok: true, version: "message-floor" });
    if (request.method !== "POST" || !url.pathname.startsWith("/hooks/inbound/"))
      return Response.json({ ok: false }, { status: 404 });
    const body = await request.text();
    if (!(await verified(env.CONNECTOR_SECRET, request.headers.get("x-switchboard-signature"), body)))
      return Response.json({ ok: false, error: "bad signature" }, { status: 401 });
    const msg = JSON.parse(body) as { messageId: string; from: string; text?: string };
    if (typeof msg.messageId !== "string" || typeof msg.from !== "string")
      return Response.json({ ok: false, error: "messageId and from are required" }, { status: 400 });
    const sessionKey = `agent:main:telegram:dm:${msg.from}`;
    const stub = env.FLOOR_SESSION.get(env.FLOOR_SESSION.idFromName(sessionKey));
    const result = await stub.enqueue({
      sessionKey,
      messageId: msg.messageId,
      runId: runIdOf(sessionKey, msg.messageId),
      from: msg.from,
      text: msg.text ?? "",
      receivedAt: Date.now(),
    });
    return Response.json({ ok: true, sessionKey, ...result }, { status: 202 });
  },
};
