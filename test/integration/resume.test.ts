import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  actor,
  changeActorEnv,
  dm,
  drain,
  eventually,
  fakeConnector,
  inbound,
  rpc,
  waitRun,
} from "./support";

/**
 * Simulates the process dying mid-run: the actor's D1 bindings fail from the Nth batch on,
 * so the run stops wherever that write happens (the alarm fails). Aborting the instance then
 * discards it, and the next alarm resumes from the checkpoint with healthy bindings.
 */
async function breakD1After(sessionKey: string, okBatches: number) {
  let batches = 0;
  const broken = (db: D1Database) =>
    new Proxy(db, {
      get(target, prop, receiver) {
        if (prop === "batch") {
          return async (stmts: D1PreparedStatement[]) => {
            if (++batches > okBatches) throw new Error("simulated crash: the process died here");
            return target.batch(stmts);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  await changeActorEnv(sessionKey, { databases: broken });
}

type Msg = { id: string; role: string; content: Array<{ type: string; text?: string; name?: string }> };

describe("run resumption", () => {
  // The one batch the actor writes for an inbound run with a tool call on an idle session: its
  // finalize (the enqueue's records and start, the tool call and result, the final reply, the
  // outcome, the delivery row). The tool step is in the checkpoint only (a crash while a step's
  // next model call is under way: run-lifecycle.test.ts "stepped").
  it("finishes a run interrupted after its final reply was checkpointed, before its finalize batch was stored, with no duplicated rows and one delivery", async () => {
    const connector = fakeConnector();
    const group = "resume-finalize";
    const key = `agent:main:telegram:group:${group}`;
    // Create the session and its actor, then break its storage for the next run.
    const warm = (await (
      await inbound("telegram", dm("warm", { chatType: "group", groupId: group }))
    ).json()) as {
      runId: string;
    };
    await waitRun(warm.runId);
    await breakD1After(key, 0);

    const ack = (await (
      await inbound("telegram", dm("call:current_time {}", { chatType: "group", groupId: group }))
    ).json()) as { runId: string };
    // The alarm fails at the broken write; the run stays running with its checkpoint.
    await eventually(async () =>
      runInDurableObject(
        actor(key),
        (_instance, state) =>
          state.storage.sql
            .exec<{ last_error: string | null }>(`SELECT last_error FROM queue WHERE run_id = ?`, ack.runId)
            .toArray()[0]?.last_error != null,
      ),
    );
    // The instance dies (in-memory state and the broken binding are gone; storage stays).
    await abortAllDurableObjects();
    // After eviction the instance has the real binding again; the retried alarm resumes.
    await runDurableObjectAlarm(actor(key));
    const done = await waitRun(ack.runId);
    expect(done.status).toBe("ok");

    const history = await rpc<{ messages: Msg[] }>("chat.history", { sessionKey: key, includeTools: true });
    const thisRun = history.payload.messages.filter((m) => m.id.startsWith(ack.runId));
    expect(thisRun.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(new Set(history.payload.messages.map((m) => m.id)).size).toBe(history.payload.messages.length);
    expect(thisRun[3]!.content[0]!.text).toMatch(/^echo: current_time -> /);

    await eventually(async () => connector.delivered.length === 2);
    await drain(key);
    const replies = connector.delivered.filter((d) => String(d.body.deliveryId).startsWith(ack.runId));
    expect(replies).toHaveLength(1);
    connector.restore();
  });
});
