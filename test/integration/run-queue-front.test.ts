/**
 * The run queue answers the head, its due times, whether others wait and admission's summary
 * from the rows its own writes return (run/queue.ts `front`). Over a real Durable Object's
 * SQLite, after every write of a random sequence, those answers equal a fresh queue's, which
 * reads them from the table.
 */
import { runInDurableObject } from "cloudflare:test";
import fc from "fast-check";
import { expect, it } from "vitest";
import { emptyCheckpoint } from "../../src/agent/checkpoint";
import type { QueuedRun } from "../../src/session/run/queue";
import { RunQueue } from "../../src/session/run/queue";
import { migrate } from "../../src/session/storage/schema";
import { params } from "./property-support";
import { actor } from "./support";

type Op =
  | { kind: "insert" }
  | { kind: "start" }
  | { kind: "save" }
  | { kind: "fail" }
  | { kind: "spec"; at: number }
  | { kind: "remove"; at: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "insert" as const }) },
  fc.constant({ kind: "start" as const }),
  fc.constant({ kind: "save" as const }),
  fc.constant({ kind: "fail" as const }),
  fc.nat(4).map((at) => ({ kind: "spec" as const, at })),
  { weight: 3, arbitrary: fc.nat(4).map((at) => ({ kind: "remove" as const, at })) },
);

function spec(n: number): QueuedRun {
  return {
    req: { sessionKey: "agent:main:main", inputs: [{ text: `m${n}` }], trigger: "rpc" },
    sessionId: "s",
  } as QueuedRun;
}

/** What the scheduler, admission and the lifecycle ask of a queue. */
function answers(q: RunQueue, now: number) {
  return {
    head: q.head(),
    others: q.othersWaiting(),
    due: q.due(now),
    summary: q.summary(),
  };
}

it("answers from the rows its writes return exactly as a queue reading its table does", async () => {
  await runInDurableObject(actor("agent:main:test:queue-front"), async (_i, state) => {
    const sql = state.storage.sql;
    migrate(sql);
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        sql.exec(`DELETE FROM queue`);
        const q = new RunQueue(sql);
        let n = 0;
        const now = 1_000_000;
        for (const o of ops) {
          const rows = q.rows();
          const head = rows[0];
          if (o.kind === "insert") q.insert(`run-${n}`, spec(n), now + n++);
          else if (o.kind === "start" && head) {
            q.beginAttempt(head);
            q.start(head, { startedAt: now, loop: emptyCheckpoint() }, n % 2 ? 30 : undefined);
          } else if (o.kind === "save" && head?.checkpoint) {
            q.saveProgress(head, { startedAt: now, loop: emptyCheckpoint() });
          } else if (o.kind === "fail" && head) q.attemptFailed(head, "boom", now + 2_000);
          else if (o.kind === "spec" && rows[o.at]) q.updateSpec(rows[o.at]!.pos, spec(n++));
          else if (o.kind === "remove" && rows[o.at]) q.remove(rows[o.at]!);
          expect(answers(q, now)).toEqual(answers(new RunQueue(sql), now));
        }
      }),
      params(500),
    );
    sql.exec(`DELETE FROM queue`);
  });
});
