/**
 * Placement (SPEC §19): which D1 database holds what. `storage.d1` names the D1 bindings; a
 * session's rows (entry, transcripts, runs, deliveries, dead records, run-id prefix) live
 * in the database chosen by a stable hash of its canonical key, and the deployment's own rows
 * (jobs, memory, pairing, maintenance) in the first one, its home. This module is the only one
 * that knows how many databases there are: everything else asks it for the database of a key or
 * of a run, or for all of them to read in parallel and merge.
 *
 * The choice is rendezvous hashing over the binding names: each name scores the key's 32-bit
 * FNV-1a (mixed with the name's own hash) and the highest score wins. It depends on the names,
 * not their order, and adding a database moves only the sessions that now score highest there
 * (about 1 in N), so a rebalance moves as little as it can. A run id carries its key's FNV-1a in
 * its first 8 hex digits (keys/run-id.ts), so a run id alone leads to its database.
 */
import { loadConfig } from "../config/load";
import { fnv1a32, placeIndex, placeKey } from "../hash";

export { placeIndex, placeKey };

/** A name in `storage.d1` with no D1 binding behind it. */
export class StorageBindingError extends Error {
  override name = "StorageBindingError";
}

interface Placement {
  readonly names: readonly string[];
  readonly databases: readonly D1Database[];
  readonly nameHashes: Uint32Array;
}

const placements = new WeakMap<object, Placement>();

/** Whether `value` is a D1 binding. */
export function isD1(value: unknown): value is D1Database {
  const v = value as { prepare?: unknown; batch?: unknown } | null | undefined;
  return typeof v?.prepare === "function" && typeof v.batch === "function";
}

/** The D1 binding `name` of `env`, or a `StorageBindingError` saying how to declare it. */
export function bindingOf(env: object, name: string, where = "storage.d1"): D1Database {
  const value = (env as Record<string, unknown>)[name];
  if (!isD1(value)) {
    throw new StorageBindingError(
      `${where}: no D1 binding named "${name}" (declare it in wrangler.toml: [[d1_databases]] binding = "${name}")`,
    );
  }
  return value;
}

function placementOf(env: Env): Placement {
  const names = loadConfig(env).storage.d1;
  const cached = placements.get(env);
  if (cached?.names === names) return cached;
  const placement: Placement = {
    names,
    databases: names.map((name, i) => bindingOf(env, name, `storage.d1[${i}]`)),
    nameHashes: Uint32Array.from(names, (n) => fnv1a32(n)),
  };
  placements.set(env, placement);
  return placement;
}

/** The binding names of `storage.d1`, in order. */
export function databaseNames(env: Env): readonly string[] {
  return placementOf(env).names;
}

/** Every database, in `storage.d1` order. */
export function allDatabases(env: Env): readonly D1Database[] {
  return placementOf(env).databases;
}

/** The database holding the rows of the session `key` (its canonical key). */
export function databaseOfKey(env: Env, key: string): D1Database {
  const p = placementOf(env);
  return p.databases[placeIndex(p.nameHashes, fnv1a32(key))] as D1Database;
}

/**
 * The database holding the run `runId`, from the key hash its first 8 hex digits carry; undefined
 * for an id that does not start with one (no such run was made by this gateway).
 */
export function databaseOfRun(env: Env, runId: string): D1Database | undefined {
  const head = runId.trim().slice(0, 8);
  if (!/^[0-9a-fA-F]{8}$/.test(head)) return undefined;
  const p = placementOf(env);
  return p.databases[placeIndex(p.nameHashes, Number.parseInt(head, 16))];
}

/** The database of the deployment's own rows (jobs, memory, pairing, maintenance): the first. */
export function homeDatabase(env: Env): D1Database {
  return placementOf(env).databases[0] as D1Database;
}

/** `read` of every database, in parallel, in `storage.d1` order. */
export function readEach<T>(env: Env, read: (db: D1Database) => Promise<T>): Promise<T[]> {
  const { databases } = placementOf(env);
  return databases.length === 1
    ? read(databases[0] as D1Database).then((r) => [r])
    : Promise.all(databases.map(read));
}

/** Groups `items` by the database of their key, in `storage.d1` order (only databases with some). */
export function groupByDatabase<T>(env: Env, items: readonly T[], keyOf: (item: T) => string) {
  const p = placementOf(env);
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const i = placeIndex(p.nameHashes, fnv1a32(keyOf(item)));
    const group = groups.get(i);
    if (group) group.push(item);
    else groups.set(i, [item]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a - b)
    .map(([i, group]) => ({ db: p.databases[i] as D1Database, items: group }));
}
