/**
 * Shared pieces of the property-based tests (fast-check): the fixed seed and run bound, junk
 * generators (wrong types, very long strings, unicode with lone surrogates, deep nesting), the
 * error-shape check, and D1 row counts to prove a refused request wrote nothing.
 */
import fc from "fast-check";
import { expect } from "vitest";
import { type ErrorCode, STATUS } from "../../src/http/errors";
import { selectEach } from "./support";

/**
 * Fixed, so `npm test` is repeatable; fast-check prints the seed and the counterexample's path
 * on failure, and `{ seed, path }` replays it. Change the seed locally to explore further.
 */
export const SEED = 0x5b0a7d;

/** fast-check parameters for one property: the fixed seed, `numRuns` bounded by the caller. */
export function params(numRuns: number): fc.Parameters<unknown> {
  return { seed: SEED, numRuns, endOnFailure: true };
}

/** One UTF-16 code unit of the surrogate range: valid in JSON text (`"\ud800"`), not in UTF-8. */
export const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));

/** Strings a connector or an operator might send by mistake or on purpose. */
export const oddString = fc.oneof(
  fc.string(),
  fc.string({ unit: "binary", maxLength: 64 }),
  fc.string({ unit: "grapheme", maxLength: 64 }),
  fc
    .array(fc.oneof(loneSurrogate, fc.string({ maxLength: 3 })), { maxLength: 8 })
    .map((parts) => parts.join("")),
  fc.constantFrom("", " ", "\u0000", "__proto__", "constructor", "toString", "main", "global", "unknown"),
);

/** Strings longer than every id bound (256); the largest are over the 1 MB body limit. */
export const longString = longerThan(256);

/** Strings of more than `bound` characters (zod's bounds count code points), up to 600,000. */
export function longerThan(bound: number): fc.Arbitrary<string> {
  return fc
    .oneof(fc.integer({ min: bound + 1, max: bound + 5_000 }), fc.constant(Math.max(bound + 1, 600_000)))
    .chain((n) => fc.constantFrom("a", "é", "😀", "\ud800").map((c) => c.repeat(n)));
}

/** Arrays and objects nested hundreds of levels deep. */
export const deepJunk = fc
  .tuple(fc.integer({ min: 10, max: 1_500 }), fc.boolean(), fc.jsonValue({ maxDepth: 1 }))
  .map(([depth, arrays, leaf]) => {
    let value: unknown = leaf;
    for (let i = 0; i < depth; i++) value = arrays ? [value] : { a: value };
    return value;
  });

/** Any JSON value a request field could hold. */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 3, arbitrary: oddString },
  {
    weight: 1,
    arbitrary: fc.oneof(fc.double(), fc.integer(), fc.constantFrom(-1, 0, 1.5, 2 ** 53, -(2 ** 60))),
  },
  { weight: 1, arbitrary: longString },
  { weight: 1, arbitrary: deepJunk },
);

/** `{"__proto__": <junk>, …}` as JSON text: an own `__proto__` key, as JSON.parse makes it. */
export function withProtoKey(body: string, value: unknown): string {
  const inner = body.trim().slice(1);
  return `{"__proto__":${JSON.stringify(value) ?? "null"}${inner.startsWith("}") ? "" : ","}${inner}`;
}

/** The documented error answer: JSON `{ ok: false, error: { code, message } }`, code ↔ status. */
export async function expectErrorShape(res: Response): Promise<{ code: ErrorCode; message: string }> {
  expect(res.headers.get("content-type") ?? "").toContain("application/json");
  const body = (await res.json()) as { ok: unknown; error?: { code?: unknown; message?: unknown } };
  expect(body.ok).toBe(false);
  expect(typeof body.error?.message).toBe("string");
  const code = body.error?.code as ErrorCode;
  expect(STATUS[code]).toBe(res.status);
  return { code, message: body.error?.message as string };
}

/** Rows in every table a request can write, in all databases. */
export async function rowCounts(): Promise<Record<string, number>> {
  const tables = ["sessions", "transcripts", "messages", "runs", "deliveries", "memories"];
  const rows = await selectEach<Record<string, number>>(
    `SELECT ${tables.map((t) => `(SELECT COUNT(*) FROM ${t}) AS ${t}`).join(", ")}`,
  );
  return Object.fromEntries(tables.map((t) => [t, rows.reduce((sum, row) => sum + (row[t] ?? 0), 0)]));
}
