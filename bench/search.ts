/**
 * Bench phase 15: transcript search (SPEC §20 `sessions_search`) against `sessions_list` of 10
 * rows, both through POST /tools/invoke at visibility `all`, one request at a time, in
 * alternating blocks (the host's speed drifts; both see the same drift), at two sizes: SMALL
 * (1k sessions, 10k messages) and LARGE (10k sessions, 100k messages), each on a gateway of its
 * own whose D1 is seeded with bulk SQL before it starts (the migration's triggers index the
 * messages as they are inserted, as a deployment's appends are). Messages are 12 words of a
 * 512-word vocabulary, so every word is in about 2% of them, as a chat's common words are.
 * Two queries: a rare word, in exactly RARE_HITS messages at either size (a name, an error code:
 * what users look for), and a common one (about 2% of the messages: its hits grow with the
 * corpus, as bm25 ranks every match). `node bench/run.ts --search` runs it alone.
 */
import { execFile } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { LocalServer } from "../scripts/lib/local-server.ts";

export const SIZES = [
  { label: "1k sessions / 10k messages", sessions: 1_000, messages: 10_000 },
  { label: "10k sessions / 100k messages", sessions: 10_000, messages: 100_000 },
] as const;
export const RARE_HITS = 20;
const RARE_WORD = "zanzibar";
const BLOCK = 25;
const BLOCKS = 8;

type LocalServerModule = typeof import("../scripts/lib/local-server.ts");

export interface SearchContext {
  launcher: Pick<
    LocalServerModule,
    "startLocalServer" | "applyLocalMigrations" | "localDatabaseName" | "scratchDir"
  >;
  wranglerBin: string;
  cwd: string;
  childEnv: NodeJS.ProcessEnv;
  config: Record<string, unknown>;
  vars: Record<string, string>;
  token: string;
  /** workerd CPU seconds of the process group of `pid` so far (scripts/lib/proc-cpu.ts). */
  cpuSeconds: (pid: number) => number;
  log: (msg: string) => void;
}

export interface ReadCost {
  /** Median latency, ms. */
  p50: number;
  /** workerd CPU per request, ms. */
  cpu: number;
  /** Hits (search) or rows (list) per answer. */
  rows: number;
}

export interface SearchCosts {
  label: string;
  sessions: number;
  messages: number;
  list: ReadCost;
  rare: ReadCost;
  common: ReadCost;
}

/** 512 pronounceable words of three syllables, the seeded messages' vocabulary. */
function vocabulary(): string[] {
  const syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo"];
  const words: string[] = [];
  for (const a of syllables) for (const b of syllables) for (const c of syllables) words.push(`${a}${b}${c}`);
  return words;
}

const COMMON_WORD = vocabulary()[77] as string;

/** The seed: sessions, their transcripts, and `messages` messages spread 10 per session. */
function seedSql(sessions: number, messages: number, now: number): string {
  const words = JSON.stringify(vocabulary()).replaceAll("'", "''");
  // Word k of message j: a different multiplier per position, so words mix across messages.
  const word = (k: number) =>
    `json_extract('${words}', '$[' || ((j * ${7919 + k * 104_729} + ${k * 31}) % 512) || ']')`;
  const text = Array.from({ length: 12 }, (_, k) => word(k)).join(" || ' ' || ");
  const every = Math.floor(messages / RARE_HITS);
  return `
INSERT INTO sessions (key, agent_id, session_id, kind, chat_type, channel, display_name, created_at, updated_at,
  session_started_at, last_interaction_at, model, context_tokens, input_tokens, output_tokens, total_tokens,
  system_sent, delivery_context, run_status, expires_at)
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${sessions})
SELECT 'agent:main:telegram:dm:search-' || i, 'main', printf('5ea7c400-0000-4000-8000-%012d', i), 'other', 'direct',
  'telegram', 'Seed ' || i, ${now} - i * 1000, ${now} - i * 1000, ${now} - i * 1000, ${now} - i * 1000, 'echo/echo',
  32000, 20, 20, 40, 1, json_object('channel', 'telegram', 'to', 'search-' || i, 'accountId', 'default'), 'idle',
  ${now + 86_400_000}
FROM n;
INSERT INTO transcripts (session_id, session_key, created_at)
SELECT session_id, key, created_at FROM sessions WHERE key LIKE 'agent:main:telegram:dm:search-%';
INSERT INTO messages (session_id, seq, id, role, content, timestamp, run_id)
WITH RECURSIVE m(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM m WHERE j < ${messages - 1})
SELECT printf('5ea7c400-0000-4000-8000-%012d', j % ${sessions} + 1), j / ${sessions} + 1, 'search-seed:' || j,
  CASE WHEN j % 2 = 0 THEN 'user' ELSE 'assistant' END,
  json_array(json_object('type', 'text', 'text', ${text} || CASE WHEN j % ${every} = 7 THEN ' ${RARE_WORD}' ELSE '' END)),
  ${now} - 3600000 + j, 'search-seed-run-' || (j / 2)
FROM m;`;
}

export function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Runs `sql` (a file of bulk SQL) on the local D1 `DB` persisted in `dir`; its wall time, s. */
export async function seedLocalD1(
  ctx: SearchContext,
  dir: string,
  name: string,
  sql: string,
): Promise<number> {
  const file = path.join(dir, name);
  writeFileSync(file, sql);
  const started = performance.now();
  await promisify(execFile)(
    ctx.wranglerBin,
    [
      "d1",
      "execute",
      ctx.launcher.localDatabaseName("DB"),
      "--local",
      "--persist-to",
      dir,
      "--file",
      file,
      "--json",
    ],
    { cwd: ctx.cwd, env: ctx.childEnv, maxBuffer: 64 * 1024 * 1024 },
  );
  return (performance.now() - started) / 1000;
}

/**
 * Each read of `reads` (its answer: rows or hits), one request at a time: BLOCK of each to warm
 * up, then BLOCKS rounds of a block of each in turn (the host's speed drifts; every read sees the
 * same drift); p50 and the workerd CPU per request of the server `pid`, and its last answer's rows.
 */
export async function alternatingBlocks<K extends string>(
  ctx: Pick<SearchContext, "cpuSeconds">,
  pid: number,
  reads: Record<K, () => Promise<number>>,
): Promise<Record<K, ReadCost>> {
  const names = Object.keys(reads) as K[];
  const samples = new Map<K, number[]>(names.map((k) => [k, []]));
  const cpu = new Map<K, number>(names.map((k) => [k, 0]));
  const rows = new Map<K, number>(names.map((k) => [k, 0]));
  for (const name of names) for (let i = 0; i < BLOCK; i++) await reads[name]();
  for (let b = 0; b < BLOCKS; b++) {
    for (const name of names) {
      const before = ctx.cpuSeconds(pid);
      for (let i = 0; i < BLOCK; i++) {
        const t0 = performance.now();
        rows.set(name, await reads[name]());
        samples.get(name)?.push(performance.now() - t0);
      }
      cpu.set(name, (cpu.get(name) ?? 0) + (ctx.cpuSeconds(pid) - before) * 1000);
    }
  }
  const n = BLOCK * BLOCKS;
  return Object.fromEntries(
    names.map((k) => [
      k,
      { p50: median(samples.get(k) ?? []), cpu: (cpu.get(k) ?? 0) / n, rows: rows.get(k) ?? 0 },
    ]),
  ) as Record<K, ReadCost>;
}

/** Phase 15 at one size: seed, start, measure the list and both searches in alternating blocks. */
async function atSize(ctx: SearchContext, size: (typeof SIZES)[number]): Promise<SearchCosts> {
  const { launcher } = ctx;
  const dir = launcher.scratchDir("switchboard-bench-search-");
  let server: LocalServer | undefined;
  try {
    ctx.log(`phase 15: transcript search at ${size.label}: migrating and seeding`);
    await launcher.applyLocalMigrations(dir, { d1: ["DB"] });
    const seconds = await seedLocalD1(
      ctx,
      dir,
      "seed-search.sql",
      seedSql(size.sessions, size.messages, Date.now()),
    );
    ctx.log(`seeded and indexed in ${seconds.toFixed(1)} s`);
    server = await launcher.startLocalServer({
      persistTo: dir,
      migrate: false,
      d1: ["DB"],
      vars: ctx.vars,
      config: ctx.config,
    });
    const target = server;
    const invoke = async (tool: string, args: Record<string, unknown>) => {
      const res = await fetch(`${target.url}/tools/invoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.token}`, "content-type": "application/json" },
        body: JSON.stringify({ tool, args }),
      });
      const parsed = (await res.json()) as { ok: boolean; result?: { count?: number } };
      if (!res.ok || !parsed.ok)
        throw new Error(`${tool} → ${res.status}: ${JSON.stringify(parsed).slice(0, 300)}`);
      return parsed.result?.count ?? 0;
    };
    const reads = {
      list: () => invoke("sessions_list", { limit: 10 }),
      rare: () => invoke("sessions_search", { query: RARE_WORD, limit: 10 }),
      common: () => invoke("sessions_search", { query: COMMON_WORD, limit: 10 }),
    };
    return { ...size, ...(await alternatingBlocks(ctx, target.pid, reads)) };
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Phase 15 at both sizes, smaller first. */
export async function searchPhase(ctx: SearchContext): Promise<SearchCosts[]> {
  const out: SearchCosts[] = [];
  for (const size of SIZES) out.push(await atSize(ctx, size));
  return out;
}

export { COMMON_WORD, RARE_WORD };
