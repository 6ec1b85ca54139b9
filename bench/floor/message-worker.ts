/**
 * The platform floor of a message, for `npm run ab -- floor <new|existing>`: a bare Worker (same
 * compatibility date and flags as the gateway, none of its code) that does only what any
 * durable gateway of this shape must do per chat message, each step once, in its cheapest form:
 *
 * - Worker: `POST /hooks/inbound/telegram` reads the body, checks its HMAC signature (the
 *   bridge's `t=…,v1=…` header), parses it, and hands the message to the session's Durable
 *   Object (one RPC call), answering 202 with what it said.
 * - Durable Object (SQLite): dedupes by message id (kept after the run, as the gateway keeps
 *   its accepted ids) and stores the message in its queue before answering, with an alarm as the backstop of a run its process loses; then, in the
 *   background: one model call over HTTP (an OpenAI-compatible chat completion, the message
 *   alone as the prompt), the reply in an outbox row, one signed POST to the connector, the
 *   turn's records in one D1 batch (the session's row, the run, the two messages, the delivery:
 *   4 statements, 1 round trip), and the queue and outbox rows removed, the alarm deleted.
 *
 * No config, no policies, no context, no transcript reads, no retries, no journal: the gateway's
 * CPU per message ÷ this one's is how far above the platform it runs on this host (under
 * `wrangler dev` the HTTP hops, the Durable Object call, the D1 simulator and DO SQLite are
 * workerd CPU too). `GET /healthz` answers like the gateway's. Never deployed.
 */
import { DurableObject } from "cloudflare:workers";

interface FloorEnv {
  DB: D1Database;
  FLOOR_SESSION: DurableObjectNamespace<FloorSession>;
  FLOOR_MODEL_URL: string;
  FLOOR_DELIVER_URL: string;
  CONNECTOR_SECRET: string;
}

interface Message {
  sessionKey: string;
  messageId: string;
  from: string;
  text: string;
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

let tables: Promise<unknown> | undefined;

/** The D1 tables, created once per isolate. */
function d1Tables(db: D1Database): Promise<unknown> {
  tables ??= db.batch([
    db.prepare(
      "create table if not exists sessions (key text primary key, session_id text not null, updated_at integer not null, last_to text, run_status text not null)",
    ),
    db.prepare(
      "create table if not exists runs (run_id text primary key, session_key text not null, status text not null, reply text, created_at integer not null, ended_at integer)",
    ),
    db.prepare(
      "create table if not exists messages (session_id text not null, seq integer not null, id text not null unique, role text not null, content text not null, primary key (session_id, seq))",
    ),
    db.prepare(
      "create table if not exists deliveries (delivery_id text primary key, run_id text not null, status text not null, text text not null, delivered_at integer)",
    ),
  ]);
  return tables;
}

export class FloorSession extends DurableObject<FloorEnv> {
  private readonly sql = this.ctx.storage.sql;
  private chain: Promise<void> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: FloorEnv) {
    super(ctx, env);
    this.sql.exec("CREATE TABLE IF NOT EXISTS received (run_id TEXT PRIMARY KEY, at INTEGER NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS queue (run_id TEXT PRIMARY KEY, message TEXT NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS outbox (delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL)");
  }

  async enqueue(m: Message): Promise<{ runId: string; status: "queued" | "duplicate" }> {
    const added = this.sql
      .exec(
        "INSERT OR IGNORE INTO received (run_id, at) VALUES (?, ?) RETURNING run_id",
        m.messageId,
        Date.now(),
      )
      .toArray().length;
    if (!added) return { runId: m.messageId, status: "duplicate" };
    this.sql.exec("INSERT INTO queue (run_id, message) VALUES (?, ?)", m.messageId, JSON.stringify(m));
    await this.ctx.storage.setAlarm(Date.now() + 10_000);
    this.chain = this.chain.then(() => this.run(m)).catch((error) => console.error(`floor run: ${error}`));
    return { runId: m.messageId, status: "queued" };
  }

  /** The backstop: runs what a lost process left in the queue. */
  override async alarm(): Promise<void> {
    for (const row of this.sql.exec<{ message: string }>("SELECT message FROM queue").toArray())
      await this.run(JSON.parse(row.message) as Message);
  }

  private async run(m: Message): Promise<void> {
    const res = await fetch(`${this.env.FLOOR_MODEL_URL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: m.text }] }),
    });
    const completion = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    const reply = completion.choices[0]?.message.content ?? "";
    const deliveryId = `${m.messageId}:reply`;
    const payload = JSON.stringify({ deliveryId, sessionKey: m.sessionKey, to: m.from, text: reply });
    this.sql.exec("INSERT OR REPLACE INTO outbox (delivery_id, payload) VALUES (?, ?)", deliveryId, payload);
    const t = Math.floor(Date.now() / 1000);
    const posted = await fetch(this.env.FLOOR_DELIVER_URL, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-switchboard-signature": `t=${t},v1=${await hmac(this.env.CONNECTOR_SECRET, `${t}.${payload}`)}`,
      },
      body: payload,
    });
    await posted.arrayBuffer();
    const now = Date.now();
    const db = this.env.DB;
    const sessionId = `s-${m.sessionKey}`;
    // A session's runs go one at a time, each longer than a millisecond.
    const seq = now * 2;
    await db.batch([
      db
        .prepare(
          "insert into sessions (key, session_id, updated_at, last_to, run_status) values (?, ?, ?, ?, 'idle') on conflict (key) do update set updated_at = excluded.updated_at, run_status = excluded.run_status",
        )
        .bind(m.sessionKey, sessionId, now, m.from),
      db
        .prepare(
          "insert or ignore into runs (run_id, session_key, status, reply, created_at, ended_at) values (?, ?, 'ok', ?, ?, ?)",
        )
        .bind(m.messageId, m.sessionKey, reply, now, now),
      db
        .prepare(
          "insert or ignore into messages (session_id, seq, id, role, content) values (?, ?, ?, 'user', ?), (?, ?, ?, 'assistant', ?)",
        )
        .bind(sessionId, seq, `${m.messageId}:in`, m.text, sessionId, seq + 1, `${m.messageId}:out`, reply),
      db
        .prepare(
          "insert or ignore into deliveries (delivery_id, run_id, status, text, delivered_at) values (?, ?, ?, ?, ?)",
        )
        .bind(deliveryId, m.messageId, posted.ok ? "delivered" : "pending", reply, now),
    ]);
    this.sql.exec("DELETE FROM outbox WHERE delivery_id = ?", deliveryId);
    this.sql.exec("DELETE FROM queue WHERE run_id = ?", m.messageId);
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
    await d1Tables(env.DB);
    const sessionKey = `agent:main:telegram:dm:${msg.from}`;
    const stub = env.FLOOR_SESSION.get(env.FLOOR_SESSION.idFromName(sessionKey));
    const result = await stub.enqueue({
      sessionKey,
      messageId: msg.messageId,
      from: msg.from,
      text: msg.text ?? "",
    });
    return Response.json({ ok: true, sessionKey, ...result }, { status: 202 });
  },
};
