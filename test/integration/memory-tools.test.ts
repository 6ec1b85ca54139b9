import { env } from "cloudflare:workers";
import { asSchema, tool } from "ai";
import { describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/schema";
import { MAX_NOTES_PER_AGENT } from "../../src/db/memory";
import { homeDatabase } from "../../src/db/placement";
import { boundNotes, MAX_READ_BYTES } from "../../src/tools/memory-read";
import { findTool } from "../../src/tools/registry";
import { invokeTools } from "./rpc-support";
import { rpc, waitRun } from "./support";

interface Answer {
  status: number;
  ok: boolean;
  result?: Record<string, unknown>;
  error?: { type: string; message: string };
}

interface ReadResult {
  status: "ok";
  notes: Array<{ id: string; key?: string; text: string; updatedAt: number }>;
  count: number;
  truncated: boolean;
}

const invoke = (config: ConfigInput, body: Record<string, unknown>): Promise<Answer> =>
  invokeTools(config, body);

let n = 0;
const agentId = () => `mt${++n}-${Date.now().toString(36)}`;
const configFor = (...ids: string[]): ConfigInput => ({ agents: { list: ids.map((id) => ({ id })) } });

function write(config: ConfigInput, sessionKey: string, args: Record<string, unknown>) {
  return invoke(config, { tool: "memory_write", sessionKey, args });
}

async function read(config: ConfigInput, sessionKey: string, args: Record<string, unknown> = {}) {
  const res = await invoke(config, { tool: "memory_read", sessionKey, args });
  expect(res.status).toBe(200);
  return res.result as unknown as ReadResult;
}

/** Gives `agent` `count` unkeyed notes in one statement, the newest at `now` (memory: the home database). */
async function seedNotes(agent: string, count: number, text: string, now = 1_000) {
  await homeDatabase(env)
    .prepare(
      `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?2)
     INSERT INTO memories (id, agent_id, key, text, created_at, updated_at, session_key)
     SELECT ?1 || ':' || i, ?1, NULL, ?3, ?4 - ?2 + i, ?4 - ?2 + i, NULL FROM c`,
    )
    .bind(agent, count, text, now)
    .run();
}

describe("memory_write and memory_read", () => {
  it("a note written in one session is read from another session of the same agent", async () => {
    const a = agentId();
    const config = configFor(a);
    const written = await write(config, `agent:${a}:telegram:group:ops`, {
      text: "  The deploy window is Tuesday 10:00 UTC.  ",
      key: "ops/deploy-window",
    });
    expect(written.status).toBe(200);
    expect(written.result).toEqual({
      status: "ok",
      id: expect.any(String),
      key: "ops/deploy-window",
      created: true,
    });
    const other = await read(config, "main", { query: "deploy" });
    expect(other).toEqual({
      status: "ok",
      notes: [
        {
          id: written.result?.id,
          key: "ops/deploy-window",
          text: "The deploy window is Tuesday 10:00 UTC.",
          updatedAt: expect.any(Number),
        },
      ],
      count: 1,
      truncated: false,
    });
  });

  it("another agent's sessions never see the note", async () => {
    const [a, b] = [agentId(), agentId()];
    const config = configFor(a, b);
    expect((await write(config, `agent:${a}:main`, { text: "a's private plan", key: "plan" })).status).toBe(
      200,
    );
    expect(await read(config, `agent:${b}:main`)).toMatchObject({ notes: [], count: 0 });
    expect(await read(config, `agent:${b}:main`, { query: "plan" })).toMatchObject({ notes: [], count: 0 });
    // The same key written by b is b's own note; a's is unchanged.
    const own = await write(config, `agent:${b}:main`, { text: "b's plan", key: "plan" });
    expect(own.result).toMatchObject({ created: true });
    expect((await read(config, `agent:${a}:main`)).notes.map((x) => x.text)).toEqual(["a's private plan"]);
  });

  it("writing a key again replaces its note; without a key every write adds one", async () => {
    const a = agentId();
    const config = configFor(a);
    const first = await write(config, "main", { text: "tz UTC", key: "user/tz" });
    const second = await write(config, "main", { text: "tz Europe/Berlin", key: "user/tz" });
    expect(second.result).toEqual({ status: "ok", id: first.result?.id, key: "user/tz", created: false });
    const loose = await write(config, "main", { text: "likes tea" });
    expect(loose.result).toEqual({ status: "ok", id: expect.any(String), created: true });
    expect((await read(config, "main")).notes.map((x) => [x.key, x.text])).toEqual([
      [undefined, "likes tea"],
      ["user/tz", "tz Europe/Berlin"],
    ]);
  });

  it("reads the newest notes first, 10 by default, limit clamped to 1..50", async () => {
    const a = agentId();
    const config = configFor(a);
    await seedNotes(a, 60, "short");
    const byDefault = await read(config, "main");
    expect(byDefault.count).toBe(10);
    expect(byDefault.notes[0]?.updatedAt).toBe(1_000);
    expect(byDefault.notes.map((x) => x.updatedAt)).toEqual(
      [...byDefault.notes.map((x) => x.updatedAt)].sort((x, y) => y - x),
    );
    expect((await read(config, "main", { limit: 3 })).count).toBe(3);
    expect((await read(config, "main", { limit: 500 })).count).toBe(50);
    expect((await read(config, "main", { limit: 0 })).count).toBe(1);
  });

  it("bounds the read result at 80 KB, dropping the oldest notes (truncated: true)", async () => {
    const a = agentId();
    const config = configFor(a);
    await seedNotes(a, 50, "x".repeat(4000));
    const res = await invoke(config, { tool: "memory_read", args: { limit: 50 }, agentId: a });
    const result = res.result as unknown as ReadResult;
    expect(result.truncated).toBe(true);
    expect(result.count).toBe(result.notes.length);
    expect(result.count).toBeGreaterThan(10);
    expect(result.count).toBeLessThan(50);
    expect(result.notes[0]?.updatedAt).toBe(1_000);
    expect(new TextEncoder().encode(JSON.stringify(res.result)).length).toBeLessThanOrEqual(MAX_READ_BYTES);
  });

  it("redacts secrets before storing a note", async () => {
    const a = agentId();
    const config = configFor(a);
    const res = await write(config, "main", { text: "deploy key sk-abcdefghijklmnopqrstuvwx for prod" });
    expect(res.result).toMatchObject({ created: true, redacted: true });
    expect((await read(config, "main")).notes[0]?.text).toBe("deploy key [REDACTED] for prod");
  });

  it("a sub-agent session has both tools, acting on its own agent", async () => {
    const a = agentId();
    const config = configFor(a);
    const child = `agent:${a}:subagent:${crypto.randomUUID()}`;
    expect((await write(config, child, { text: "found by the child", key: "research/result" })).status).toBe(
      200,
    );
    expect((await read(config, "main", { query: "child" })).notes.map((x) => x.key)).toEqual([
      "research/result",
    ]);
    expect((await read(config, child)).count).toBe(1);
  });

  it("a run's tool call writes for the run's agent; its other sessions read the note", async () => {
    const tag = crypto.randomUUID();
    const queued = await rpc<{ runId: string }>("agent", {
      sessionKey: `agent:main:mem-${tag}`,
      message: `call:memory_write {"text":"remember ${tag}","key":"run/${tag}"}`,
    });
    expect(await waitRun(queued.payload.runId)).toMatchObject({ status: "ok" });
    const run = await rpc<{ reply: string }>("runs.get", { runId: queued.payload.runId });
    expect(run.payload.reply).toMatch(/"created":true/);
    const found = await read(configFor("main"), "main", { query: tag });
    expect(found.notes.map((x) => [x.key, x.text])).toEqual([[`run/${tag}`, `remember ${tag}`]]);
  });

  it("needs no gateway.tools.allow entry over HTTP", async () => {
    const a = agentId();
    const res = await write({ ...configFor(a), gateway: { tools: { allow: [] } } }, `agent:${a}:main`, {
      text: "ok",
    });
    expect(res.status).toBe(200);
  });
});

describe("memory_write refusals", () => {
  it("names the field and the limit for invalid arguments", async () => {
    const a = agentId();
    const config = configFor(a);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ text: "x".repeat(4001) }, "args: `text`: must be at most 4000 characters (got 4001)"],
      [{ text: "   " }, "args: `text`: must not be empty"],
      [{}, "args: `text` is required"],
      [{ text: "ok", key: "k".repeat(129) }, "args: `key`: must be at most 128 characters (got 129)"],
      [{ text: "ok", key: "has space" }, "args: `key`: may contain only letters, digits and . _ : - /"],
      [{ text: "ok", tags: ["x"] }, "args: unknown field `tags`"],
    ];
    for (const [args, message] of cases) {
      const res = await write(config, `agent:${a}:main`, args);
      expect({ status: res.status, error: res.error }).toEqual({
        status: 400,
        error: { type: "invalid_request", message },
      });
    }
    expect(await read(config, `agent:${a}:main`)).toMatchObject({ count: 0 });
  });

  it("refuses writes when the agent's workspace is read-only; reads still work", async () => {
    const a = agentId();
    await write(configFor(a), "main", { text: "written while writable", key: "k" });
    const readOnly: ConfigInput = { agents: { list: [{ id: a, workspace: { writable: false } }] } };
    const res = await write(readOnly, "main", { text: "new", key: "k" });
    expect(res.status).toBe(403);
    expect(res.error?.type).toBe("forbidden");
    expect(res.error?.message).toMatch(/agents\.list\[\]\.workspace\.writable/);
    expect((await read(readOnly, "main")).notes.map((x) => x.text)).toEqual(["written while writable"]);
  });

  it("refuses a new note at the per-agent cap, saying to reuse keys; rewriting a key still works", async () => {
    const a = agentId();
    const config = configFor(a);
    await write(config, "main", { text: "v1", key: "status" });
    await seedNotes(a, MAX_NOTES_PER_AGENT - 1, "filler");
    for (const args of [{ text: "one more" }, { text: "one more", key: "new-key" }]) {
      const res = await write(config, "main", args);
      expect({ status: res.status, type: res.error?.type }).toEqual({ status: 400, type: "tool_error" });
      expect(res.error?.message).toMatch(/memory is full: .* keeps 500 notes/);
      expect(res.error?.message).toMatch(/writing to its key/);
    }
    const rewrite = await write(config, "main", { text: "v2", key: "status" });
    expect(rewrite.result).toMatchObject({ key: "status", created: false });
  });
});

describe("memory tools and the tool filters", () => {
  it("tools.deny hides a memory tool (404 not_found), the other stays", async () => {
    const a = agentId();
    const config: ConfigInput = { ...configFor(a), tools: { deny: ["memory_write"] } };
    const res = await write(config, "main", { text: "x" });
    expect({ status: res.status, type: res.error?.type }).toEqual({ status: 404, type: "not_found" });
    expect(res.error?.message).toMatch(/not available/);
    expect((await read(config, "main")).status).toBe("ok");
  });

  it("tools.allow without the memory tools hides them", async () => {
    const a = agentId();
    const config: ConfigInput = { ...configFor(a), tools: { allow: ["current_time"] } };
    expect((await invoke(config, { tool: "memory_read" })).status).toBe(404);
    expect((await write(config, "main", { text: "x" })).status).toBe(404);
  });

  it("an agent's own tools.deny hides them for that agent only", async () => {
    const [a, b] = [agentId(), agentId()];
    const config: ConfigInput = {
      agents: { list: [{ id: a, tools: { deny: ["memory_read", "memory_write"] } }, { id: b }] },
    };
    expect((await invoke(config, { tool: "memory_read", sessionKey: `agent:${a}:main` })).status).toBe(404);
    expect((await write(config, `agent:${a}:main`, { text: "x" })).status).toBe(404);
    expect((await write(config, `agent:${b}:main`, { text: "x" })).status).toBe(200);
  });

  it("tools.subagents.tools.deny hides them from sub-agents only", async () => {
    const a = agentId();
    const config: ConfigInput = {
      ...configFor(a),
      tools: { subagents: { tools: { deny: ["memory_write"] } } },
    };
    expect((await write(config, `agent:${a}:subagent:${crypto.randomUUID()}`, { text: "x" })).status).toBe(
      404,
    );
    expect((await write(config, `agent:${a}:main`, { text: "x" })).status).toBe(200);
  });
});

describe("boundNotes", () => {
  it("keeps every note that fits and drops the rest, oldest (last) first", () => {
    const rows = [3, 2, 1].map((i) => ({
      id: `n${i}`,
      agentId: "a",
      key: i === 2 ? "k" : null,
      text: "y".repeat(100),
      createdAt: i,
      updatedAt: i,
      sessionKey: null,
    }));
    expect(boundNotes(rows)).toMatchObject({
      truncated: false,
      notes: [{ id: "n3" }, { id: "n2", key: "k" }, { id: "n1" }],
    });
    expect(boundNotes(rows)).not.toHaveProperty("notes.0.key");
    const two = boundNotes(rows, 256 + 2 + 2 * 150 + 1);
    expect(two).toMatchObject({ truncated: true, notes: [{ id: "n3" }, { id: "n2" }] });
  });
});

describe("memory tool schemas", () => {
  async function jsonSchema(name: string) {
    const def = findTool(name);
    if (!def) throw new Error(`${name} is not registered`);
    return asSchema(tool({ description: "", inputSchema: def.schema as never }).inputSchema).jsonSchema;
  }

  it("tell the model the limits, with integers as JSON number", async () => {
    expect(await jsonSchema("memory_write")).toMatchObject({
      type: "object",
      additionalProperties: false,
      required: ["text"],
      properties: {
        text: { type: "string", minLength: 1, maxLength: 4000, description: expect.stringContaining("4000") },
        key: { type: "string", minLength: 1, maxLength: 128, pattern: "^[A-Za-z0-9._:/-]+$" },
      },
    });
    const read = await jsonSchema("memory_read");
    expect(read).toMatchObject({
      type: "object",
      additionalProperties: false,
      properties: {
        query: { type: "string" },
        limit: { type: "number", description: expect.stringContaining("1-50") },
      },
    });
    expect(JSON.stringify(read)).not.toContain('"integer"');
  });
});
