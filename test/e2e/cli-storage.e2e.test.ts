/**
 * `switchboard storage rebalance` and `storage verify` in process, against a fake gateway
 * (test/e2e/support/cli.ts): the loop over `storage.rebalance` passes each cursor back, prints a
 * line per call and the verify step at the end, and exits 1 when verify found problems.
 */
import { describe, expect, it } from "vitest";
import type { RebalanceProgress } from "../../cli/commands/storage.ts";
import { ok, runCli } from "./support/cli.ts";

const FOUR = ["DB", "DB_1", "DB_2", "DB_3"];

function progress(fields: Partial<RebalanceProgress>): RebalanceProgress {
  return {
    from: ["DB"],
    to: FOUR,
    dryRun: false,
    databases: { DB: { scanned: 300, moved: 220, left: 400, leftToMove: 300 } },
    rows: {},
    remaining: { sessions: 400, toMove: 300 },
    conflicts: [],
    done: false,
    ...fields,
  };
}

const VERIFIED = {
  ok: true,
  to: FOUR,
  databases: FOUR,
  rows: { sessions: { found: 700, atStart: 700 } },
  problems: [],
  problemCount: 0,
  notes: [],
  recorded: true,
};

describe("storage rebalance", () => {
  it("calls storage.rebalance with each cursor until done, then prints the verify step", async () => {
    const answers = [
      progress({ cursor: "c1" }),
      progress({
        cursor: "c2",
        databases: { DB: { scanned: 300, moved: 225, left: 100, leftToMove: 75 } },
        remaining: { sessions: 100, toMove: 75 },
        conflicts: [{ table: "sessions", key: "agent:main:x", database: "DB", target: "DB_2" }],
      }),
      progress({
        done: true,
        databases: { DB: { scanned: 100, moved: 74, left: 0, leftToMove: 0 } },
        remaining: { sessions: 0, toMove: 0 },
        verify: VERIFIED,
      }),
    ];
    const r = await runCli(["storage", "rebalance", "--batch", "300"], () => ok(answers.shift()));
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => [q.method, q.params])).toEqual([
      ["storage.rebalance", { limit: 300 }],
      ["storage.rebalance", { limit: 300, cursor: "c1" }],
      ["storage.rebalance", { limit: 300, cursor: "c2" }],
    ]);
    expect(r.stdout.trimEnd().split("\n")).toEqual([
      "rebalance [DB] → [DB, DB_1, DB_2, DB_3]",
      "DB: scanned 300, moved 220 — left 400 (~300 to move)",
      "DB: scanned 300, moved 225 — left 100 (~75 to move)",
      "conflict: a sessions row of agent:main:x is refused by DB_2; left in DB",
      "DB: scanned 100, moved 74 — done",
      "verified: every row is where [DB, DB_1, DB_2, DB_3] places it (DB, DB_1, DB_2, DB_3); the gateway serves with it",
    ]);
  });

  it("a dry run says what would move and asks for no verify", async () => {
    const r = await runCli(["storage", "rebalance", "--dry-run"], () =>
      ok(
        progress({
          dryRun: true,
          done: true,
          databases: { DB: { scanned: 700, moved: 519, left: 0, leftToMove: 0 } },
        }),
      ),
    );
    expect(r.code).toBe(0);
    expect(r.requests[0]?.params).toEqual({ dryRun: true });
    expect(r.stdout).toContain(
      "DB: scanned 700, would move 519 — done\n519 session(s) would move; nothing was changed\n",
    );
  });

  it("exits 1 when verify found problems, after printing them", async () => {
    const failed = {
      ...VERIFIED,
      ok: false,
      recorded: false,
      problemCount: 1,
      problems: [
        { problem: "doubled", message: "sessions rows of k are in both DB_1 and DB; they belong in DB" },
      ],
    };
    const r = await runCli(["storage", "verify"], () => ok(failed));
    expect(r.code).toBe(1);
    expect(r.requests.map((q) => q.method)).toEqual(["storage.verify"]);
    expect(r.stdout).toBe(
      "verify found 1 problem(s); the gateway keeps refusing until they are fixed:\n" +
        "  doubled: sessions rows of k are in both DB_1 and DB; they belong in DB\n",
    );
    expect(r.stderr).toBe("switchboard: verify found 1 problem(s)\n");
  });

  it("a bad --batch is a usage error before any call", async () => {
    const r = await runCli(["storage", "rebalance", "--batch", "0"], () => ok({}));
    expect(r.code).toBe(2);
    expect(r.requests).toEqual([]);
  });
});
