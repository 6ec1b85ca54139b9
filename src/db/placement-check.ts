/**
 * The start check of placement (SPEC §19): every database records the `storage.d1` list its rows
 * were placed with (`storage_placement`), and a gateway started with another list is refused,
 * naming `switchboard storage rebalance`: with a different list, a session's rows would be looked
 * for in the wrong database and written to a second one. So is a list that leaves out a
 * database holding sessions (one an earlier list named, or DB). Checked once per isolate and
 * list (one read per database, in parallel); a database with no record yet gets one, unless
 * it holds sessions placed by an earlier list (a database holding sessions but no record is
 * a deployment of one database: the list `[its name]`).
 */
import { eq } from "drizzle-orm";
import { allDatabases, databaseNames, isD1 } from "./placement";
import { database } from "./queries";
import * as schema from "./schema";

/** Started with another `storage.d1` than the data was placed with. */
export class StorageListChangedError extends Error {
  override name = "StorageListChangedError";
}

export interface PlacementRecord {
  /** The list this database's rows were placed with (undefined: none recorded yet). */
  recorded: string[] | undefined;
  /** While a rebalance runs (kept in the home database): the list it moves to. */
  movingTo: string[] | undefined;
  /** Whether the database holds any session. */
  used: boolean;
}

const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((name, i) => name === b[i]);

const listText = (names: readonly string[]) => `[${names.map((n) => JSON.stringify(n)).join(", ")}]`;

/** What `db` records of its placement, and whether it holds sessions (one round trip). */
export async function readPlacementRecord(db: D1Database): Promise<PlacementRecord> {
  const d = database(db);
  const [marks, used] = await d.batch([
    d.select().from(schema.storagePlacement).where(eq(schema.storagePlacement.id, 1)).limit(1),
    d.select({ key: schema.sessions.key }).from(schema.sessions).limit(1),
  ]);
  const mark = marks[0];
  return { recorded: mark?.databases, movingTo: mark?.movingTo ?? undefined, used: used.length > 0 };
}

/** Records `names` as the list `db`'s rows are placed with (and no rebalance under way). */
export function writePlacementRecord(db: D1Database, names: readonly string[], now: number) {
  const values = { id: 1, databases: [...names], movingTo: null, counts: null, updatedAt: now };
  return database(db)
    .insert(schema.storagePlacement)
    .values(values)
    .onConflictDoUpdate({ target: schema.storagePlacement.id, set: values })
    .run();
}

/**
 * Why the databases cannot serve the list `names` (undefined: they can). `records[i]` is what
 * `names[i]` records; `unlisted` what the Worker's other D1 bindings record (one holding
 * sessions was left out of the list). Pure.
 */
export function placementProblem(
  names: readonly string[],
  records: readonly PlacementRecord[],
  unlisted: ReadonlyArray<{ name: string; record: PlacementRecord }> = [],
) {
  const advice =
    `run \`switchboard storage rebalance\` to move the sessions whose database changes ` +
    `(it reads the earlier list from the databases), or set storage.d1 back`;
  for (const [i, record] of records.entries()) {
    const name = names[i] ?? "";
    if (record.movingTo) {
      return `a rebalance to ${listText(record.movingTo)} is under way in ${name}: finish it with \`switchboard storage rebalance\``;
    }
    const placedWith = record.recorded ?? (record.used ? [name] : undefined);
    if (placedWith && !sameList(placedWith, names)) {
      return (
        `storage.d1 is ${listText(names)}, but the rows in ${name} were placed with ${listText(placedWith)}` +
        `${record.recorded ? "" : " (written before lists were recorded)"}: ${advice}`
      );
    }
  }
  for (const { name, record } of unlisted) {
    if (!record.used) continue;
    const placedWith = record.recorded ?? [name];
    return `storage.d1 is ${listText(names)}, but ${name}, not in it, holds sessions placed with ${listText(placedWith)}: ${advice}`;
  }
  return undefined;
}

/**
 * The D1 bindings outside `names` that may hold sessions: those an earlier list named (as the
 * listed databases record it) and DB, the one database of a deployment from before lists.
 */
function unlistedDatabases(
  env: Env,
  names: readonly string[],
  records: readonly PlacementRecord[],
): Array<{ name: string; db: D1Database }> {
  const named = new Set(["DB", ...records.flatMap((r) => [...(r.recorded ?? []), ...(r.movingTo ?? [])])]);
  return [...named]
    .filter((name) => !names.includes(name))
    .flatMap((name) => {
      const value = (env as unknown as Record<string, unknown>)[name];
      return isD1(value) ? [{ name, db: value }] : [];
    });
}

const checked = new WeakMap<D1Database, { names: readonly string[]; done: Promise<void> }>();

/**
 * Resolves once every database was found placed with the configured list (recording it where
 * none is recorded yet); rejects with `StorageListChangedError` otherwise. Cached per isolate
 * and list; a failed read is tried again by the next call.
 */
export function checkPlacement(env: Env, now = Date.now()): Promise<void> {
  const names = databaseNames(env);
  const databases = allDatabases(env);
  const home = databases[0] as D1Database;
  const cached = checked.get(home);
  if (cached?.names === names) return cached.done;
  const done = (async () => {
    const records = await Promise.all(databases.map(readPlacementRecord));
    const unlisted = await Promise.all(
      unlistedDatabases(env, names, records).map(async ({ name, db }) => ({
        name,
        record: await readPlacementRecord(db),
      })),
    );
    const problem = placementProblem(names, records, unlisted);
    if (problem) throw new StorageListChangedError(problem);
    await Promise.all(
      databases.map((db, i) => (records[i]?.recorded ? undefined : writePlacementRecord(db, names, now))),
    );
  })();
  checked.set(home, { names, done });
  done.catch(() => {
    if (checked.get(home)?.done === done) checked.delete(home);
  });
  return done;
}
