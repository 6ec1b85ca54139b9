import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  bindingOf,
  databaseNames,
  databaseOfKey,
  databaseOfRun,
  placeIndex,
  placeKey,
  StorageBindingError,
} from "../../src/db/placement";
import { type PlacementRecord, placementProblem, readPlacementRecord } from "../../src/db/placement-check";
import { fnv1a32 } from "../../src/hash";
import { runIdFor } from "../../src/keys/run-id";

const FOUR = ["DB", "DB_1", "DB_2", "DB_3"];
const keys = Array.from({ length: 10_000 }, (_, i) => `agent:main:telegram:dm:${i * 7919}`);

function counts(names: readonly string[]): number[] {
  const out = names.map(() => 0);
  for (const key of keys) out[placeKey(names, key)] = (out[placeKey(names, key)] ?? 0) + 1;
  return out;
}

describe("placement", () => {
  it("spreads keys evenly: each of 4 databases holds 25% ± 2% of 10,000 keys", () => {
    for (const n of counts(FOUR)) expect(Math.abs(n / keys.length - 0.25)).toBeLessThan(0.02);
  });

  it("one database holds everything", () => {
    expect(counts(["DB"])).toEqual([keys.length]);
  });

  it("depends on the names, not their order", () => {
    const reversed = [...FOUR].reverse();
    for (const key of keys.slice(0, 500)) {
      expect(reversed[placeKey(reversed, key)]).toBe(FOUR[placeKey(FOUR, key)]);
    }
  });

  it("adding a database moves only the keys that now land on it (about 1 in 5)", () => {
    const five = [...FOUR, "DB_4"];
    let moved = 0;
    for (const key of keys) {
      const before = FOUR[placeKey(FOUR, key)];
      const after = five[placeKey(five, key)];
      if (before !== after) {
        expect(after).toBe("DB_4");
        moved++;
      }
    }
    expect(Math.abs(moved / keys.length - 0.2)).toBeLessThan(0.02);
  });

  it("leads from a run id to its session's database (the id carries the key's hash)", async () => {
    const names = FOUR.map((n) => fnv1a32(n));
    for (const key of keys.slice(0, 200)) {
      const runId = await runIdFor(key, `m-${key}`);
      expect(Number.parseInt(runId.slice(0, 8), 16)).toBe(fnv1a32(key));
      expect(placeIndex(names, Number.parseInt(runId.slice(0, 8), 16))).toBe(placeKey(FOUR, key));
    }
  });

  it("with the default list, every key and run id is in DB; an id without a key hash is in none", async () => {
    expect(databaseOfKey(env, "agent:main:main")).toBe(env.DB);
    expect(databaseOfRun(env, await runIdFor("agent:main:main"))).toBe(env.DB);
    expect(databaseOfRun(env, "not-a-run-id")).toBeUndefined();
  });

  it("names a binding the Worker does not have, and how to declare it", () => {
    expect(() => bindingOf(env, "DB_9", "storage.d1[1]")).toThrow(StorageBindingError);
    expect(() => bindingOf(env, "DB_9", "storage.d1[1]")).toThrow(
      'storage.d1[1]: no D1 binding named "DB_9" (declare it in wrangler.toml: [[d1_databases]] binding = "DB_9")',
    );
    expect(() => bindingOf(env, "GATEWAY_TOKEN")).toThrow(StorageBindingError);
  });
});

describe("the start check of placement", () => {
  const record = (r: Partial<PlacementRecord>): PlacementRecord => ({
    recorded: undefined,
    movingTo: undefined,
    used: false,
    ...r,
  });

  it("accepts new databases and databases placed with the same list", () => {
    expect(placementProblem(["DB"], [record({})])).toBeUndefined();
    expect(placementProblem(["DB"], [record({ used: true })])).toBeUndefined();
    expect(
      placementProblem(FOUR, [record({ recorded: FOUR, used: true }), record({}), record({}), record({})]),
    ).toBeUndefined();
  });

  it("refuses a list other than the one the rows were placed with, naming the rebalance", () => {
    const problem = placementProblem(FOUR, [record({ used: true }), record({}), record({}), record({})]);
    expect(problem).toContain(
      'storage.d1 is ["DB", "DB_1", "DB_2", "DB_3"], but the rows in DB were placed with ["DB"]',
    );
    expect(problem).toContain("switchboard storage rebalance");
    expect(placementProblem(["DB"], [record({ recorded: FOUR, used: true })])).toContain(
      'the rows in DB were placed with ["DB", "DB_1", "DB_2", "DB_3"]',
    );
    // A database that is new to the list but was placed with another one.
    expect(placementProblem(["DB", "DB_1"], [record({}), record({ recorded: ["DB_1"] })])).toContain(
      'the rows in DB_1 were placed with ["DB_1"]',
    );
  });

  it("refuses a list that leaves out a database holding sessions", () => {
    expect(
      placementProblem(["DB_1"], [record({})], [{ name: "DB", record: record({ used: true }) }]),
    ).toContain('storage.d1 is ["DB_1"], but DB, not in it, holds sessions placed with ["DB"]');
    // A database left out that holds no session is no one's concern.
    expect(
      placementProblem(
        ["DB"],
        [record({ used: true })],
        [{ name: "DB_1", record: record({ recorded: FOUR }) }],
      ),
    ).toBeUndefined();
  });

  it("refuses to serve while a rebalance is under way", () => {
    expect(placementProblem(FOUR, [record({ recorded: ["DB"], movingTo: FOUR })])).toContain(
      "a rebalance to",
    );
  });
});

describe("the test Worker's databases", () => {
  it("has four D1 bindings, each migrated, and those of storage.d1 placed with it", async () => {
    const names = databaseNames(env);
    for (const name of ["DB", "DB_1", "DB_2", "DB_3"]) {
      const record = await readPlacementRecord(bindingOf(env, name));
      expect(record.recorded).toEqual(names.includes(name) ? names : undefined);
    }
  });
});
