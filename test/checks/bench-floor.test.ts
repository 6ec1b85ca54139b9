/**
 * The bench's platform-floor Workers under their own `wrangler dev`. The read floor
 * (bench/floor/worker.ts, row 9f of `npm run bench`): seeded once (again changes nothing), its
 * read answers a 50-row page of listing-shaped rows newest first, from one database or merged
 * from four, and its /healthz answers like the gateway's. The message floor
 * (bench/floor/message-worker.ts, `npm run ab -- floor`): a signed message is answered 202, its
 * reply (the model's) reaches the connector signed, once, and a repeat is a duplicate; the
 * model is sent the given system prompt (naming the session), tool schemas and parameters, and a
 * session's next message its history; the turns are in the gateway's own D1 tables (its
 * migrations), the new session's run-id prefix registered.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { floorRequestVar, requestTemplate, startModel, workloadVars } from "../../bench/workload.ts";
import { executeLocalD1, type LocalServer, startLocalServer } from "../../scripts/lib/local-server.ts";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature.ts";
import { startFakeConnector } from "../e2e/support/fake-connector.ts";

const root = path.resolve(import.meta.dirname, "../..");
let floor: LocalServer;

const post = (p: string, body: unknown) =>
  fetch(`${floor.url}${p}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });

beforeAll(async () => {
  floor = await startLocalServer({
    persistTo: mkdtempSync(path.join(tmpdir(), "switchboard-floor-e2e-")),
    migrate: false,
    wranglerConfig: path.join(root, "bench/floor/wrangler.toml"),
  });
}, 90_000);

afterAll(async () => {
  await floor?.stop();
  if (floor) rmSync(floor.persistTo, { recursive: true, force: true });
});

describe("the bench's floor Worker", () => {
  it("answers /healthz", async () => {
    const res = await fetch(`${floor.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, version: "floor" });
  });

  it("reads a page of 50 list-shaped rows, newest first, after an idempotent seed", async () => {
    expect((await post("/seed", { count: 60 })).status).toBe(200);
    expect((await post("/seed", { count: 60 })).status).toBe(200);
    const res = await post("/read", { tool: "sessions_list", args: { limit: 50 } });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as {
      result: { count: number; sessions: Array<Record<string, unknown>> };
    };
    expect(result.count).toBe(50);
    const first = result.sessions[0] ?? {};
    expect(first).toMatchObject({ key: "agent:main:subagent:floor-1", agentId: "main", kind: "other" });
    expect(first).not.toHaveProperty("label");
    // The 24 listed columns less the 7 this fixture leaves null, as a list row leaves nulls out.
    expect(Object.keys(first)).toHaveLength(17);
    const times = result.sessions.map((s) => s.updatedAt as number);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("reads the newest 50 of four databases' pages", async () => {
    const res = await post("/read", { tool: "sessions_list", args: { limit: 50 }, databases: 4 });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as {
      result: { count: number; sessions: Array<Record<string, unknown>> };
    };
    expect(result.count).toBe(50);
    // Each database holds 60 rows numbered on from the one before; the newest are the first's.
    expect(result.sessions.map((s) => s.key)).toEqual(
      Array.from({ length: 50 }, (_, i) => `agent:main:subagent:floor-${i + 1}`),
    );
  });
});

/** What the floor is told the gateway sends its model besides the messages. */
const SYSTEM = 'You answer the floor\'s test.\n\n## Session\n- session key: {sessionKey}\n- "quoted" line';
const TOOLS = [
  {
    type: "function",
    function: {
      name: "current_time",
      description: "Returns the current time.",
      parameters: { type: "object", properties: {}, additionalProperties: false },
    },
  },
];
const PARAMS = { model: "m", tool_choice: "auto" };

describe("the bench's message floor Worker", () => {
  it("answers 202, delivers the model's reply signed once, dedupes, sends the history, writes the gateway's tables", async () => {
    const secret = workloadVars.CONNECTOR_SECRET;
    const connector = await startFakeConnector(secret);
    const model = await startModel();
    const server = await startLocalServer({
      persistTo: mkdtempSync(path.join(tmpdir(), "switchboard-message-floor-e2e-")),
      wranglerConfig: path.join(root, "bench/floor/message.wrangler.toml"),
      vars: {
        ...workloadVars,
        FLOOR_MODEL_URL: model.url,
        FLOOR_DELIVER_URL: connector.url,
        FLOOR_REQUEST: floorRequestVar({ system: SYSTEM, tools: TOOLS, params: PARAMS }),
      },
    });
    const key = "agent:main:telegram:dm:ann";
    const until = async (n: number) => {
      const deadline = Date.now() + 30_000;
      while (connector.deliveries.length < n && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
    };
    try {
      const message = (id: string, text: string) =>
        JSON.stringify({ messageId: id, chatType: "direct", from: "ann", text });
      const send = async (body: string, signature?: string) =>
        fetch(`${server.url}/hooks/inbound/telegram`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            [SIGNATURE_HEADER]: signature ?? (await signBody(secret, body)),
          },
          body,
        });
      const first = message("m-1", "hi");
      expect((await send(first, await signBody("not the secret", first))).status).toBe(401);
      const accepted = await send(first);
      expect(accepted.status).toBe(202);
      const ack = (await accepted.json()) as { runId: string };
      expect(ack).toMatchObject({ ok: true, sessionKey: key, status: "queued" });
      expect(ack.runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      await until(1);
      expect(connector.deliveries).toHaveLength(1);
      expect(connector.deliveries[0]?.signatureCheck).toBe("ok");
      expect(connector.deliveries[0]?.body).toMatchObject({
        deliveryId: `${ack.runId}:reply`,
        kind: "reply",
        sessionKey: key,
        to: "ann",
        text: "ok",
        replyToMessageId: "m-1",
      });
      expect(model.calls()).toBe(1);
      const sent = JSON.parse(model.lastRequest() ?? "{}") as Record<string, unknown>;
      expect(sent).toEqual({
        ...PARAMS,
        tools: TOOLS,
        messages: [
          { role: "system", content: SYSTEM.replace("{sessionKey}", key) },
          { role: "user", content: "hi" },
        ],
      });
      expect(requestTemplate(model.lastRequest() ?? "", key)).toMatchObject({
        system: SYSTEM,
        tools: TOOLS,
        params: PARAMS,
      });

      const again = await send(first);
      expect(again.status).toBe(202);
      expect(await again.json()).toMatchObject({ ok: true, status: "duplicate", runId: ack.runId });

      const second = await send(message("m-2", "again"));
      expect(await second.json()).toMatchObject({ status: "queued" });
      await until(2);
      expect(connector.attempts).toHaveLength(2);
      expect(model.calls()).toBe(2);
      expect((JSON.parse(model.lastRequest() ?? "{}") as { messages: unknown[] }).messages).toEqual([
        { role: "system", content: SYSTEM.replace("{sessionKey}", key) },
        { role: "user", content: "hi" },
        { role: "assistant", content: "ok" },
        { role: "user", content: "again" },
      ]);
    } finally {
      await server.stop();
      await connector.close();
      model.close();
    }
    try {
      // Read once the floor is down (its workerd holds the files).
      const q = async <T>(sql: string) =>
        ((await executeLocalD1<T>(server.persistTo, "DB", sql))[0] ?? []) as T[];
      const migrations = readdirSync(path.join(root, "migrations")).filter((f) => f.endsWith(".sql"));
      expect(
        (await q<{ name: string }>("select name from d1_migrations order by id")).map((r) => r.name),
      ).toEqual(migrations.sort());
      const [session] = await q<Record<string, unknown>>("select * from sessions");
      expect(session).toMatchObject({
        key,
        agent_id: "main",
        kind: "other",
        chat_type: "direct",
        channel: "telegram",
        model: "m",
        input_tokens: 24,
        output_tokens: 2,
        total_tokens: 13,
        last_to: "ann",
        run_status: "idle",
      });
      const runs = await q<{ run_id: string; session_id: string; status: string; reply: string }>(
        "select * from runs order by created_at",
      );
      expect(runs.map((r) => [r.status, r.reply, r.session_id])).toEqual([
        ["ok", "ok", session?.session_id],
        ["ok", "ok", session?.session_id],
      ]);
      const [prefix] = await q<{ prefix: string; session_key: string }>("select * from run_prefixes");
      expect(prefix).toEqual({ prefix: runs[0]?.run_id.slice(0, 18), session_key: key });
      expect(runs[1]?.run_id.slice(0, 18)).toBe(prefix?.prefix);
      const messages = await q<{ seq: number; role: string; content: string }>(
        "select seq, role, content from messages order by seq",
      );
      expect(messages.map((m) => [m.seq, m.role, JSON.parse(m.content)])).toEqual([
        [1, "user", [{ type: "text", text: "hi" }]],
        [2, "assistant", [{ type: "text", text: "ok" }]],
        [3, "user", [{ type: "text", text: "again" }]],
        [4, "assistant", [{ type: "text", text: "ok" }]],
      ]);
      // The first reply's outcome came with the second turn's batch; the second's waits in the
      // floor's Durable Object for the session's next one.
      const deliveries = await q<{ delivery_id: string; status: string; attempts: number }>(
        "select delivery_id, status, attempts from deliveries",
      );
      expect(deliveries).toEqual([
        { delivery_id: `${runs[0]?.run_id}:reply`, status: "delivered", attempts: 1 },
      ]);
    } finally {
      rmSync(server.persistTo, { recursive: true, force: true });
    }
  }, 180_000);
});
