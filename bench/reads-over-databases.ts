/**
 * Bench phase 9d: the read paths of phases 9 and 9h (sessions_list at visibility `all` and
 * `tree`, sessions_history, limit 50, through POST /tools/invoke, one request at a time) on a
 * gateway of their own whose sessions are spread over `names` (`storage.d1`), each seeded into
 * the database its key is placed in (src/hash.ts `placeKey`, the gateway's own rule): SEEDED
 * direct sessions, the acting session and its TREE_CHILDREN spawned children, and a session
 * whose transcript holds HISTORY_MESSAGES messages. Each read is measured in blocks alternating
 * with /healthz (the caller's `paired`), so its ratio to /healthz is what the read-path bar
 * compares with the platform floor (9f). With one name it is the same data in one database:
 * `node bench/run.ts --reads` runs it with 1 and with 4 (after 9f), alone.
 */
import { execFile } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { placeKey } from "../src/hash.ts";

export const SEEDED = 1_000;
export const TREE_CHILDREN = 60;
export const HISTORY_MESSAGES = 100;

type LocalServerModule = typeof import("../scripts/lib/local-server.ts");

export interface ReadsContext {
  /** The local-server module of the source snapshot the bench runs. */
  launcher: Pick<
    LocalServerModule,
    "startLocalServer" | "applyLocalMigrations" | "configWithD1" | "localDatabaseName" | "scratchDir"
  >;
  wranglerBin: string;
  cwd: string;
  childEnv: NodeJS.ProcessEnv;
  /** The gateway's config at a visibility (the bench's own, storage.d1 added here). */
  config: (visibility: "all" | "tree") => Record<string, unknown>;
  vars: Record<string, string>;
  token: string;
  requester: string;
  /** A read's and /healthz's workerd CPU per request on `target`, in alternating blocks. */
  paired: (
    read: () => Promise<void>,
    target: { url: string; pid: number },
  ) => Promise<{ read: number; healthz: number }>;
  warmUp: (read: () => Promise<void>) => Promise<void>;
  log: (msg: string) => void;
}

export interface ReadCosts {
  databases: number;
  listAll: { read: number; healthz: number };
  listTree: { read: number; healthz: number };
  history: { read: number; healthz: number };
  /** Sessions seeded in each database, in `names` order. */
  spread: number[];
}

const sql = (s: string) => `'${s.replaceAll("'", "''")}'`;

interface SeedSession {
  key: string;
  sessionId: string;
  at: number;
  spawnedBy?: string;
  channel?: string;
}

function sessionRow(s: SeedSession, now: number): string {
  const peer = s.key.split(":").at(-1) ?? "peer";
  const channel = s.channel ? sql(s.channel) : "NULL";
  const delivery = s.channel
    ? sql(JSON.stringify({ channel: s.channel, to: peer, accountId: "default" }))
    : "NULL";
  return `(${sql(s.key)}, 'main', ${sql(s.sessionId)}, 'other', 'direct', ${channel}, ${sql(`Seed ${peer}`)}, ${s.at}, ${s.at}, ${s.at}, ${s.at}, 'echo/echo', 32000, 20, 20, 40, 1, ${s.spawnedBy ? sql(s.spawnedBy) : "NULL"}, ${delivery}, 'idle', ${now + 86_400_000})`;
}

/** INSERTs of `rows` in statements of at most 200 rows. */
function inserts(head: string, rows: string[]): string {
  const out: string[] = [];
  for (let i = 0; i < rows.length; i += 200) out.push(`${head}\n${rows.slice(i, i + 200).join(",\n")};`);
  return out.join("\n");
}

/**
 * The SQL seeding each database of `names` with the sessions placed there (and the list they were
 * placed with, as a gateway records it: db/placement-check.ts), and how many sessions each gets.
 */
function seedSql(
  names: readonly string[],
  ctx: ReadsContext,
  historyKey: string,
): Array<{ sql: string; sessions: number }> {
  const now = Date.now();
  const sessions: SeedSession[] = [];
  for (let i = 1; i <= SEEDED; i++) {
    sessions.push({
      key: `agent:main:telegram:dm:seed-${i}`,
      sessionId: `5eed0000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      at: now - 3_600_000 - i * 1000,
      channel: "telegram",
    });
  }
  for (let i = 1; i <= TREE_CHILDREN; i++) {
    sessions.push({
      key: `agent:main:subagent:bench-child-${i}`,
      sessionId: `c41d0000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      at: now - 1_800_000 - i * 1000,
      spawnedBy: ctx.requester,
    });
  }
  sessions.push({ key: ctx.requester, sessionId: "9e90e500-0000-4000-8000-000000000001", at: now - 1000 });
  const history = { key: historyKey, sessionId: "415700e5-0000-4000-8000-000000000001", at: now - 500 };
  sessions.push(history);

  const per = names.map(() => ({
    sessions: [] as string[],
    transcripts: [] as string[],
    messages: [] as string[],
  }));
  for (const s of sessions) {
    const db = per[placeKey(names, s.key)];
    if (!db) throw new Error(`no database for ${s.key}`);
    db.sessions.push(sessionRow(s, now));
    db.transcripts.push(`(${sql(s.sessionId)}, ${sql(s.key)}, ${s.at})`);
  }
  const home = per[placeKey(names, history.key)];
  for (let i = 1; i <= HISTORY_MESSAGES; i++) {
    const user = i % 2 === 1;
    const text = user
      ? `seeded user message ${i}: a line of chat of a typical length, give or take`
      : `echo: seeded user message ${i - 1}: a line of chat of a typical length, give or take`;
    home?.messages.push(
      `(${sql(history.sessionId)}, ${i}, ${sql(`seed:${history.sessionId}:${i}`)}, ${user ? "'user'" : "'assistant'"}, ${sql(JSON.stringify([{ type: "text", text }]))}, ${now - 3_600_000 + i}, ${sql(`seed-run-${Math.ceil(i / 2)}`)})`,
    );
  }
  const placed = sql(JSON.stringify(names));
  return per.map((db) => ({
    sessions: db.sessions.length,
    sql: [
      `INSERT INTO storage_placement (id, databases, moving_to, counts, updated_at) VALUES (1, ${placed}, NULL, NULL, ${now});`,
      inserts(
        `INSERT INTO sessions (key, agent_id, session_id, kind, chat_type, channel, display_name, created_at, updated_at,
  session_started_at, last_interaction_at, model, context_tokens, input_tokens, output_tokens, total_tokens,
  system_sent, spawned_by, delivery_context, run_status, expires_at) VALUES`,
        db.sessions,
      ),
      inserts("INSERT INTO transcripts (session_id, session_key, created_at) VALUES", db.transcripts),
      inserts(
        "INSERT INTO messages (session_id, seq, id, role, content, timestamp, run_id) VALUES",
        db.messages,
      ),
    ]
      .filter(Boolean)
      .join("\n"),
  }));
}

/**
 * Phase 9d over `names`: seeds a fresh persistence directory (migrated, before its gateway
 * starts, as the bench's bulk seeding does), starts the gateway at visibility `all`, then `tree`,
 * and measures each read.
 */
export async function readsOverDatabases(ctx: ReadsContext, names: readonly string[]): Promise<ReadCosts> {
  const { launcher } = ctx;
  const dir = launcher.scratchDir("switchboard-bench-reads-");
  const wranglerConfig = launcher.configWithD1(undefined, names);
  const historyKey = "agent:main:bench-history-4";
  let server: LocalServer | undefined;
  try {
    ctx.log(`phase 9d: read paths over ${names.length} D1 database(s): migrating and seeding`);
    await launcher.applyLocalMigrations(dir, wranglerConfig ? { wranglerConfig, d1: names } : { d1: names });
    const seeds = seedSql(names, ctx, historyKey);
    const spread: number[] = [];
    for (const [i, name] of names.entries()) {
      const file = path.join(dir, `seed-${name}.sql`);
      writeFileSync(file, seeds[i]?.sql ?? "");
      const args = ["d1", "execute", launcher.localDatabaseName(name), "--local", "--persist-to", dir];
      if (wranglerConfig) args.push("--config", wranglerConfig);
      args.push("--file", file, "--json");
      await promisify(execFile)(ctx.wranglerBin, args, {
        cwd: ctx.cwd,
        env: ctx.childEnv,
        maxBuffer: 64 * 1024 * 1024,
      });
      spread.push(seeds[i]?.sessions ?? 0);
    }
    const start = async (visibility: "all" | "tree") => {
      const opts: LocalServerOptions = {
        persistTo: dir,
        migrate: false,
        d1: names,
        vars: ctx.vars,
        config: { ...ctx.config(visibility), storage: { d1: [...names] } },
      };
      return launcher.startLocalServer(opts);
    };
    const invoke = async (target: LocalServer, body: unknown, check: (result: unknown) => boolean) => {
      const res = await fetch(`${target.url}/tools/invoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      const parsed = JSON.parse(text) as { ok: boolean; result?: unknown };
      if (!res.ok || !parsed.ok || !check(parsed.result)) {
        throw new Error(`/tools/invoke → ${res.status}: ${text.slice(0, 300)}`);
      }
    };
    const list = (target: LocalServer) => () =>
      invoke(
        target,
        { tool: "sessions_list", args: { limit: 50 }, sessionKey: ctx.requester },
        (r) => (r as { count?: number }).count === 50,
      );
    const measure = async (target: LocalServer, read: () => Promise<void>) => {
      await ctx.warmUp(read);
      return ctx.paired(read, target);
    };

    server = await start("all");
    const listAll = await measure(server, list(server));
    const target = server;
    const history = await measure(target, () =>
      invoke(
        target,
        { tool: "sessions_history", args: { sessionKey: historyKey, limit: 50 }, sessionKey: historyKey },
        (r) => (r as { messages?: unknown[] }).messages?.length === 50,
      ),
    );
    await server.stop();
    server = await start("tree");
    const listTree = await measure(server, list(server));
    return { databases: names.length, listAll, listTree, history, spread };
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
