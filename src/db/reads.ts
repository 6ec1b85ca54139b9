/**
 * Read statements for the hot read paths (an entry by key, a listing page, a history page):
 * plain SQL through D1, rows read as arrays (`.raw()`: the D1 client builds no object per row)
 * and mapped to the row shape by the schema's columns (columns.ts: name and decoder per
 * property), with no drizzle query builder or row mapping on the way (docs/decisions.md, "CPU
 * per message and per read"). A row is what drizzle's `.select().from(table)` returns
 * (test/unit/reads.test.ts compares them). The select list of a projection (every column, or
 * the properties a caller names) is built once; callers write only their WHERE/ORDER clauses,
 * with `?` parameters.
 */
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { type Decode, tableDef } from "./columns";

/** [property, column name, quoted column name, decoder]. */
type Decoder = [key: string, name: string, quoted: string, decode: Decode];

interface Projection {
  /** `select "a", "b" from "t"` */
  head: string;
  /** One per selected column, in select order. */
  decoders: Decoder[];
  /** Each selected property's position among them. */
  positions: Map<string, number>;
}

interface TablePlan {
  name: string;
  /** Every column's decoder, by property, in declaration order. */
  decoders: Map<string, Decoder>;
  /** By the property list ("*" for every column). */
  projections: Map<string, Projection>;
}

const plans = new WeakMap<SQLiteTable, TablePlan>();

function plan(table: SQLiteTable): TablePlan {
  let p = plans.get(table);
  if (p) return p;
  const def = tableDef(table);
  p = {
    name: def.name,
    decoders: new Map(
      Object.entries(def.columns).map(([key, column]) => [
        key,
        [key, column.name, `"${column.name}"`, column.decode],
      ]),
    ),
    projections: new Map(),
  };
  plans.set(table, p);
  return p;
}

/** The select of `keys` (default: every column, in declaration order) of `table`. */
function projection(table: SQLiteTable, keys?: readonly string[]): Projection {
  const p = plan(table);
  const id = keys ? keys.join(",") : "*";
  let proj = p.projections.get(id);
  if (proj) return proj;
  const decoders = (keys ?? [...p.decoders.keys()]).map((key) => {
    const d = p.decoders.get(key);
    if (!d) throw new Error(`${p.name} has no column ${key}`);
    return d;
  });
  proj = {
    head: `select ${decoders.map((d) => d[2]).join(", ")} from "${p.name}"`,
    decoders,
    positions: new Map(decoders.map((d, i) => [d[0], i])),
  };
  p.projections.set(id, proj);
  return proj;
}

/** The quoted column name of a property of `table`. */
export function col<T extends SQLiteTable>(table: T, key: keyof T["$inferSelect"] & string): string {
  const d = plan(table).decoders.get(key);
  if (!d) throw new Error(`${plan(table).name} has no column ${key}`);
  return d[2];
}

/** The properties `keys` of a row of `table` (every property when absent). */
type Selected<T extends SQLiteTable, K extends keyof T["$inferSelect"]> = Pick<T["$inferSelect"], K>;

/** A stored value as a row holds it (null, and a missing column, are null). */
function decoded(value: unknown, decode: Decode): unknown {
  return value === null || value === undefined ? null : decode ? decode(value) : value;
}

/** A D1 row (keyed by column name, as `.all()` and `batch` give it) as the schema's row shape. */
export function mapRow<T extends SQLiteTable>(table: T, raw: Record<string, unknown>): T["$inferSelect"] {
  const row: Record<string, unknown> = {};
  for (const [key, name, , decode] of projection(table).decoders) row[key] = decoded(raw[name], decode);
  return row as T["$inferSelect"];
}

/** A raw D1 row (values in select order from `offset`) of a projection as an object. */
function mapValues(decoders: Decoder[], values: unknown[], offset: number): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (let i = 0; i < decoders.length; i++) {
    // Indexed, not destructured: this runs for every cell of every row read.
    const d = decoders[i] as Decoder;
    row[d[0]] = decoded(values[i + offset], d[3]);
  }
  return row;
}

/** Every column (or the properties `keys`) of `table` for the rows `rest` (`where … order by … limit …`) selects. */
export async function selectRows<T extends SQLiteTable, K extends keyof T["$inferSelect"] & string>(
  db: D1Database,
  table: T,
  rest: string,
  params: unknown[],
  keys?: readonly K[],
): Promise<Selected<T, K>[]> {
  const [rows] = await selectUnion(db, [{ table, keys, rest, params }]);
  return (rows ?? []) as Selected<T, K>[];
}

/** One select of a union: a projection of a table and its `where … order by … limit …`. */
export interface SelectPart {
  table: SQLiteTable;
  /** The properties selected; every column when absent. */
  keys?: readonly string[] | undefined;
  rest: string;
  params: unknown[];
}

/** D1's limits per statement: bound parameters, and the selects of one compound select. */
export const MAX_BOUND_PARAMS = 100;
export const MAX_UNION_TERMS = 5;

/**
 * The rows of several selects (each ordered and limited by its own `rest`, of one table or of
 * several), one list per part, read in one statement: the selects joined by `union all`, each
 * row tagged with its part, parts of different projections side by side with NULLs in the
 * other's columns. More parts than D1 takes in one statement (MAX_UNION_TERMS selects,
 * MAX_BOUND_PARAMS parameters) go in a few statements, read in parallel. Each list is in the
 * order its part's rows came (a union promises no order across parts; callers that need one
 * sort). Rows are decoded by the schema's columns (columns.ts), as drizzle decodes them.
 */
export async function selectUnion(db: D1Database, parts: SelectPart[]): Promise<Record<string, unknown>[][]> {
  return (await selectUnionRaw(db, parts)).map((rows) => rows.map(decodeRow));
}

/**
 * A row as D1 answered it, not decoded yet: its values (from `offset`, in its projection's
 * order). A merge of several databases' rows orders them by `rawValue` and decodes only the
 * rows it keeps (`decodeRow`).
 */
export interface RawRow {
  readonly values: unknown[];
  readonly offset: number;
  readonly projection: Projection;
}

/** The stored value of the selected property `key` of a raw row (a text or a number, as D1 holds it). */
export function rawValue(row: RawRow, key: string): unknown {
  const i = row.projection.positions.get(key);
  if (i === undefined) throw new Error(`the row does not select ${key}`);
  return row.values[row.offset + i];
}

/** A raw row in the schema's row shape. */
export function decodeRow(row: RawRow): Record<string, unknown> {
  return mapValues(row.projection.decoders, row.values, row.offset);
}

/** `selectUnion`'s rows, not decoded. */
export async function selectUnionRaw(db: D1Database, parts: SelectPart[]): Promise<RawRow[][]> {
  // Where each projection's columns start in a union row (after the part tag).
  const projections = parts.map((part) => projection(part.table, part.keys));
  const offsets = new Map<Projection, number>();
  let width = 0;
  for (const p of projections) {
    if (offsets.has(p)) continue;
    offsets.set(p, width);
    width += p.decoders.length;
  }
  const chunks: number[][] = [];
  let params = 0;
  parts.forEach((part, i) => {
    const last = chunks.at(-1);
    if (last && last.length < MAX_UNION_TERMS && params + part.params.length <= MAX_BOUND_PARAMS) {
      last.push(i);
      params += part.params.length;
    } else {
      chunks.push([i]);
      params = part.params.length;
    }
  });
  const lists: RawRow[][] = parts.map(() => []);
  await Promise.all(
    chunks.map(async (chunk) => {
      if (chunk.length === 1) {
        const i = chunk[0] as number;
        const projection = projections[i] as Projection;
        const part = parts[i] as SelectPart;
        const rows = await db
          .prepare(`${projection.head} ${part.rest}`)
          .bind(...part.params)
          .raw();
        lists[i] = rows.map((values) => ({ values, offset: 0, projection }));
        return;
      }
      const sql = chunk
        .map((i) => {
          const p = projections[i] as Projection;
          const before = offsets.get(p) ?? 0;
          const after = width - before - p.decoders.length;
          return `select ${i}${", null".repeat(before)}, *${", null".repeat(after)} from (${p.head} ${(parts[i] as SelectPart).rest})`;
        })
        .join(" union all ");
      const rows = await db
        .prepare(sql)
        .bind(...chunk.flatMap((i) => (parts[i] as SelectPart).params))
        .raw();
      for (const values of rows) {
        const i = values[0] as number;
        const projection = projections[i] as Projection;
        lists[i]?.push({ values, offset: 1 + (offsets.get(projection) ?? 0), projection });
      }
    }),
  );
  return lists;
}
