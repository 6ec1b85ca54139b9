/**
 * What a rebalance (SPEC §19) reads and records around the moves: the earlier `storage.d1`, read
 * from what the databases record (storage_placement), the databases it involves, and the two
 * writes that bracket it. Its start records, in every database involved, the list it moves to
 * (the gateway refuses to serve until it is done), and in the new home the row counts it began
 * with, which its verify step compares; its end records the new list in each of them, the home
 * last, so a kill in either write is found and redone by the next call.
 */
import type { z } from "zod";
import { fnv1a32 } from "../hash";
import { CountsSchema, decodeJson, NameListSchema } from "./json-columns";
import { bindingOf, databaseNames, placeIndex, StorageBindingError } from "./placement";
import { writePlacementRecord } from "./placement-check";
import { database } from "./queries";
import { ALL_TABLES } from "./rebalance-tables";
import * as schema from "./schema";

/** A rebalance cannot go on as asked; the message says what to change. */
export class RebalanceRefusedError extends Error {
  override name = "RebalanceRefusedError";
  constructor(
    message: string,
    /** "input": the request is wrong (400); "state": the deployment is (409). */
    readonly kind: "input" | "state" = "state",
  ) {
    super(message);
  }
}

export interface DatabaseState {
  name: string;
  db: D1Database;
  /** The list its rows were placed with (undefined: none recorded). */
  recorded: string[] | undefined;
  movingTo: string[] | undefined;
  counts: Record<string, number> | undefined;
  /** Whether it holds any session. */
  used: boolean;
}

export interface RebalancePlan {
  /** The list the rows were placed with. */
  from: string[];
  /** storage.d1: the list they are moved to. */
  to: string[];
  /** Every database of either list, `to` first. */
  involved: DatabaseState[];
  /** The rebalance's start is recorded: the new home names `to` and the counts it began with. */
  started: boolean;
  /** The row counts over every database when it began (when started). */
  counts: Record<string, number> | undefined;
  /** The index in `to` of the database of a key. */
  place(key: string): number;
}

export const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((name, i) => name === b[i]);

export const listText = (names: readonly string[]) => `[${names.map((n) => JSON.stringify(n)).join(", ")}]`;

/** A JSON column of storage_placement as read raw (null: none), through the column's schema. */
function decoded<T>(column: string, schemaOf: z.ZodType<T>, text: unknown): T | undefined {
  return text === null || text === undefined
    ? undefined
    : decodeJson(`storage_placement.${column}`, schemaOf, text);
}
async function readState(name: string, db: D1Database): Promise<DatabaseState> {
  let results: D1Result[];
  try {
    results = await db.batch([
      db.prepare(`SELECT databases, moving_to, counts FROM storage_placement WHERE id = 1`),
      db.prepare(`SELECT 1 AS used FROM sessions LIMIT 1`),
    ]);
  } catch (error) {
    if (!/no such table/i.test(String(error))) throw error;
    throw new RebalanceRefusedError(
      `${name} is not migrated (${error instanceof Error ? error.message : error}): apply the migrations to every database first (npm run migrate -- --remote)`,
    );
  }
  const mark = results[0]?.results[0] as
    | { databases: string; moving_to: unknown; counts: unknown }
    | undefined;
  return {
    name,
    db,
    recorded: decoded("databases", NameListSchema, mark?.databases),
    movingTo: decoded("moving_to", NameListSchema, mark?.moving_to),
    counts: decoded("counts", CountsSchema, mark?.counts),
    used: (results[1]?.results.length ?? 0) > 0,
  };
}

/**
 * The databases of storage.d1 and of every list they record, read (the bindings of an earlier
 * list must still be bound: their sessions are still there).
 */
async function readStates(env: Env, to: readonly string[]): Promise<Map<string, DatabaseState>> {
  const states = new Map<string, DatabaseState>();
  let wanted: Array<[string, string]> = to.map((name, i) => [name, `storage.d1[${i}]`]);
  while (wanted.length > 0) {
    const read = await Promise.all(
      wanted.map(([name, where]) => {
        try {
          return readState(name, bindingOf(env, name, where));
        } catch (error) {
          if (!(error instanceof StorageBindingError)) throw error;
          throw new RebalanceRefusedError(
            `${error.message}; keep the bindings of the earlier list until \`switchboard storage rebalance\` is done`,
          );
        }
      }),
    );
    for (const state of read) states.set(state.name, state);
    const next = new Map<string, string>();
    for (const state of read) {
      for (const name of [...(state.recorded ?? []), ...(state.movingTo ?? [])]) {
        if (!states.has(name)) next.set(name, `the list recorded in ${state.name}`);
      }
    }
    wanted = [...next];
  }
  return states;
}

/** The list the rows were placed with, from the records (see placement-check.ts). */
function earlierList(to: readonly string[], states: Map<string, DatabaseState>): string[] {
  const home = states.get(to[0] as string);
  const moving = [...states.values()].filter((s) => s.movingTo);
  if (moving.length > 0) {
    const first = (home?.movingTo ? home : moving[0]) as DatabaseState;
    const target = first.movingTo as string[];
    const other = moving.find((s) => !sameList(s.movingTo as string[], target));
    if (other) {
      throw new RebalanceRefusedError(
        `${first.name} records a rebalance to ${listText(target)}, ${other.name} one to ${listText(other.movingTo as string[])}: set storage.d1 to one of them and run \`switchboard storage rebalance\``,
      );
    }
    if (!sameList(target, to)) {
      throw new RebalanceRefusedError(
        `a rebalance to ${listText(target)} is under way (recorded in ${first.name}), but storage.d1 is ${listText(to)}: set storage.d1 back to ${listText(target)} and finish it, then change storage.d1`,
      );
    }
    return first.recorded ?? [first.name];
  }
  const placed = new Map<string, { list: string[]; by: string[] }>();
  for (const s of states.values()) {
    if (!s.used) continue;
    const list = s.recorded ?? [s.name];
    const id = JSON.stringify(list);
    const entry = placed.get(id) ?? { list, by: [] };
    entry.by.push(s.name);
    placed.set(id, entry);
  }
  if (placed.size > 1) {
    const lists = [...placed.values()].map((p) => `${p.by.join(", ")}: ${listText(p.list)}`).join("; ");
    throw new RebalanceRefusedError(
      `the databases hold sessions placed with different lists (${lists}); no single earlier list to move from`,
    );
  }
  const [only] = placed.values();
  if (only) return only.list;
  // No sessions anywhere: the deployment's own rows are where the records say.
  return to.map((name) => states.get(name)?.recorded).find((list) => list !== undefined) ?? [...to];
}

/** Reads where the rows are and where they go. */
export async function planRebalance(env: Env): Promise<RebalancePlan> {
  const to = [...databaseNames(env)];
  const states = await readStates(env, to);
  const from = earlierList(to, states);
  const names = [...new Set([...to, ...from])];
  const involved = names.map((name) => states.get(name) as DatabaseState);
  const home = states.get(to[0] as string) as DatabaseState;
  const started = !!home.movingTo && sameList(home.movingTo, to) && !!home.counts;
  const hashes = Uint32Array.from(to, (n) => fnv1a32(n));
  return {
    from,
    to,
    involved,
    started,
    counts: started ? home.counts : undefined,
    place: (key) => placeIndex(hashes, fnv1a32(key)),
  };
}

/** Rows per table over the databases (one batch each, in parallel). */
export async function countRows(databases: readonly DatabaseState[]): Promise<Record<string, number>[]> {
  return Promise.all(
    databases.map(async ({ db }) => {
      const results = await db.batch(
        ALL_TABLES.map((t) => db.prepare(`SELECT count(*) AS n FROM "${t.name}"`)),
      );
      return Object.fromEntries(
        ALL_TABLES.map((t, i) => [t.name, (results[i]?.results[0] as { n: number } | undefined)?.n ?? 0]),
      );
    }),
  );
}

export function sumCounts(counts: readonly Record<string, number>[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const c of counts) for (const [table, n] of Object.entries(c)) total[table] = (total[table] ?? 0) + n;
  return total;
}

function writeMark(
  db: D1Database,
  from: string[],
  to: string[],
  counts: Record<string, number> | null,
  now: number,
) {
  const values = { id: 1, databases: from, movingTo: to, counts, updatedAt: now };
  return database(db)
    .insert(schema.storagePlacement)
    .values(values)
    .onConflictDoUpdate({ target: schema.storagePlacement.id, set: values })
    .run();
}

/**
 * Records the start (before anything moves): the list it moves to in every database involved,
 * then, in the new home, with the row counts over all of them. Returns the counts.
 */
export async function recordStart(plan: RebalancePlan, now: number): Promise<Record<string, number>> {
  const counts = sumCounts(await countRows(plan.involved));
  const [home, ...rest] = plan.involved as [DatabaseState, ...DatabaseState[]];
  await Promise.all(rest.map((s) => writeMark(s.db, plan.from, plan.to, null, now)));
  await writeMark(home.db, plan.from, plan.to, counts, now);
  return counts;
}

/** Records the end: `to` as the list of every database involved, the new home last. */
export async function recordDone(plan: RebalancePlan, now: number): Promise<void> {
  const [home, ...rest] = plan.involved as [DatabaseState, ...DatabaseState[]];
  await Promise.all(rest.map((s) => writePlacementRecord(s.db, plan.to, now)));
  await writePlacementRecord(home.db, plan.to, now);
}
