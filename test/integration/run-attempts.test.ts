/**
 * No run can wedge a session (SPEC §5): a run is executed at most MAX_RUN_ATTEMPTS times; a run
 * that keeps failing for a reason other than a provider error (an unreadable checkpoint, a D1
 * write that always fails) then ends `error` with its cause, its waiters are answered, the chat
 * gets a short notice, and the next queued message runs. A throwing tool never fails a run:
 * the model sees a one-line summary of the exception.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RUN_FAILED_NOTICE } from "../../src/session/chat/posts";
import { MAX_RUN_ATTEMPTS, MAX_RUN_STARTS, RUN_RETRY_DELAYS_MS } from "../../src/session/run/queue";
import { currentTimeTool } from "../../src/tools/current-time";
import {
  CONNECTORS,
  group,
  groupMessage,
  history,
  SCRIPTED_MODEL_CONFIG,
  scriptedWorld,
} from "./model-support";
import { hangingModel, SLOW_MODEL_CONFIG, withActorConfig } from "./rpc-support";
import { actor, changeActorEnv, eventually, inbound, rpc, waitRun } from "./support";

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

async function say(id: string, text: string): Promise<string> {
  const res = await inbound("telegram", groupMessage(id, text));
  expect(res.status).toBe(202);
  return ((await res.json()) as { runId: string }).runId;
}

async function attemptsOf(key: string, runId: string) {
  return runInDurableObject(
    actor(key),
    (_i, state) =>
      state.storage.sql
        .exec<{ attempts: number; last_error: string | null }>(
          `SELECT attempts, last_error FROM queue WHERE run_id = ?`,
          runId,
        )
        .toArray()[0],
  );
}

/**
 * Runs the actor's alarm as if each failed attempt's backoff had passed, until `runId` has left
 * the actor's queue (bounded: at most `limit` alarms; the actor's own alarm may run some too).
 */
async function driveAttempts(key: string, runId: string, limit = MAX_RUN_ATTEMPTS + 3) {
  vi.useFakeTimers({ toFake: ["Date"] });
  let now = Date.now();
  try {
    for (let i = 0; i < limit; i++) {
      const queued = await runInDurableObject(
        actor(key),
        (_i, state) =>
          state.storage.sql.exec(`SELECT 1 FROM queue WHERE run_id = ?`, runId).toArray().length > 0,
      );
      if (!queued) return;
      now += (RUN_RETRY_DELAYS_MS.at(-1) ?? 0) + 1_000;
      vi.setSystemTime(now);
      await runDurableObjectAlarm(actor(key));
    }
  } finally {
    vi.useRealTimers();
  }
}

describe("a tool that always throws", () => {
  it("does not fail the run: the model sees a one-line summary, without a stack", async () => {
    vi.spyOn(currentTimeTool, "execute").mockImplementation(() => {
      const error = new TypeError("cannot read properties of undefined (reading 'zone')");
      error.stack = `${error.message}\n    at secret (/srv/internal/host-7/tool.js:1:1)`;
      throw error;
    });
    const id = `throwing-tool-${crypto.randomUUID().slice(0, 6)}`;
    const first = await say(id, "call:current_time {}");
    expect((await waitRun(first)).status).toBe("ok");
    const result = (await history(group(id))).find((m) => m.role === "toolResult");
    expect(result?.isError).toBe(true);
    const text = JSON.stringify(result?.content);
    expect(text).toContain("TypeError: cannot read properties of undefined");
    expect(text).not.toContain("/srv/internal");
    // The session goes on.
    expect((await waitRun(await say(id, "still there?"))).status).toBe("ok");
  });
});

describe("a run whose checkpoint can no longer be read", () => {
  it(`ends error after ${MAX_RUN_ATTEMPTS} attempts with its cause, and the next message runs`, {
    timeout: 20_000,
  }, async () => {
    const model = hangingModel();
    const id = `bad-checkpoint-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    const warm = await say(id, "warm up");
    expect((await waitRun(warm)).status).toBe("ok");
    await withActorConfig(key, { ...SLOW_MODEL_CONFIG, connectors: CONNECTORS });
    const stuck = await say(id, "this one hangs");
    await eventually(async () => model.calls() > 0);
    const next = await say(id, "and this one waits");

    await runInDurableObject(actor(key), (_i, state) => {
      state.storage.sql.exec(
        `UPDATE queue SET checkpoint = '{"startedAt": 1, "loop": {' WHERE run_id = ?`,
        stuck,
      );
    });
    await abortAllDurableObjects();
    model.restore();
    const delivered = scriptedWorld(() => ({ text: "unused" })).delivered;

    // Attempt 1 was the one the abort cut short; each next one fails to read the checkpoint.
    await driveAttempts(key, stuck);
    const done = await waitRun(stuck);
    expect(done.status).toBe("error");
    expect(done.error).toMatch(
      new RegExp(
        `^run failed after ${MAX_RUN_ATTEMPTS} attempts: DurableDocumentError: stored run progress is not JSON`,
      ),
    );
    const run = await rpc<{ status: string; error: string }>("runs.get", { runId: stuck });
    expect(run.payload).toMatchObject({ status: "error" });
    expect(run.payload.error).toContain("stored run progress is not JSON");
    await eventually(async () => delivered.some((d) => d.body.text === RUN_FAILED_NOTICE));

    await runDurableObjectAlarm(actor(key));
    expect((await waitRun(next)).status).toBe("ok");
  });
});

describe("a run whose process stops during every execution", () => {
  it(`ends error after ${MAX_RUN_STARTS} starts, while fewer interruptions only resume it`, {
    timeout: 20_000,
  }, async () => {
    const model = hangingModel();
    const id = `interrupted-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    expect((await waitRun(await say(id, "warm up"))).status).toBe("ok");
    await withActorConfig(key, { ...SLOW_MODEL_CONFIG, connectors: CONNECTORS });
    const stuck = await say(id, "this one hangs");
    await eventually(async () => model.calls() > 0);
    // As if it had been interrupted all but once already.
    await runInDurableObject(actor(key), (_i, state) => {
      state.storage.sql.exec(`UPDATE queue SET starts = ? WHERE run_id = ?`, MAX_RUN_STARTS - 1, stuck);
    });
    await abortAllDurableObjects();
    // Its alarm starts it again (start MAX_RUN_STARTS): it runs, and hangs, again.
    await withActorConfig(key, { ...SLOW_MODEL_CONFIG, connectors: CONNECTORS });
    await eventually(async () => model.calls() > 1);
    await abortAllDurableObjects();
    model.restore();
    await runDurableObjectAlarm(actor(key)); // one start too many: the run ends
    const done = await waitRun(stuck);
    expect(done.status).toBe("error");
    expect(done.error).toMatch(
      new RegExp(`^run stopped ${MAX_RUN_STARTS} times in a row before its next step`),
    );
    expect((await waitRun(await say(id, "next"))).status).toBe("ok");
  });
});

describe("a run interrupted between its steps", () => {
  async function startsOf(key: string, runId: string) {
    return runInDurableObject(
      actor(key),
      (_i, state) =>
        state.storage.sql
          .exec<{ starts: number }>(`SELECT starts FROM queue WHERE run_id = ?`, runId)
          .toArray()[0]?.starts,
    );
  }

  it(`resumes however often it is interrupted while it keeps storing steps (${MAX_RUN_STARTS} in a row without one end it)`, {
    timeout: 20_000,
  }, async () => {
    const id = `stepping-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    const config = { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS };
    expect((await waitRun(await say(id, "warm up"))).status).toBe("ok");
    // Model calls of the run: 1 hangs, 2 asks for a tool, 3 hangs, 4 answers.
    let calls = 0;
    const world = scriptedWorld(() => {
      calls++;
      if (calls === 1 || calls === 3) return { text: "late", delayMs: 60_000 };
      if (calls === 2) return { tool: "current_time", args: {} };
      return { text: "done at last" };
    });
    await withActorConfig(key, config);
    const run = await say(id, "step, then hang");
    await eventually(async () => calls === 1);
    // As if it had been interrupted all but once already, without a step.
    await runInDurableObject(actor(key), (_i, state) => {
      state.storage.sql.exec(`UPDATE queue SET starts = ? WHERE run_id = ?`, MAX_RUN_STARTS - 1, run);
    });
    await abortAllDurableObjects();
    // Started again (start MAX_RUN_STARTS) by its backstop alarm, run now rather than waited
    // for (its pass hangs with the model, so it is not awaited): it stores its tool step, which
    // sets the count back, then hangs again.
    await withActorConfig(key, config);
    runDurableObjectAlarm(actor(key)).catch(() => {});
    await eventually(async () => calls === 3, 10_000);
    expect(await startsOf(key, run)).toBe(0);
    await abortAllDurableObjects();
    // One more interruption is its first since that step: it resumes and finishes.
    await withActorConfig(key, config);
    runDurableObjectAlarm(actor(key)).catch(() => {});
    const done = await waitRun(run);
    expect(done.status).toBe("ok");
    expect(calls).toBe(4);
    world.restore();
  });
});

describe("a run whose D1 writes always fail", () => {
  it("ends error with the storage error as its cause, and the next message runs", {
    timeout: 20_000,
  }, async () => {
    const id = `bad-write-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    const warm = await say(id, "warm up");
    expect((await waitRun(warm)).status).toBe("ok");
    // Every batch holding a statement with the doomed run's reply fails.
    const poison = "echo: doomed";
    const poisoned = new WeakSet<object>();
    const tagged = (stmt: D1PreparedStatement): D1PreparedStatement =>
      new Proxy(stmt, {
        get(target, prop) {
          if (prop === "bind") {
            return (...args: unknown[]) => {
              const bound = target.bind(...args);
              if (args.some((v) => typeof v === "string" && v.includes(poison))) poisoned.add(bound);
              return bound;
            };
          }
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    const failing = (db: D1Database) =>
      new Proxy(db, {
        get(target, prop) {
          if (prop === "prepare") return (sql: string) => tagged(target.prepare(sql));
          if (prop === "batch") {
            return async (stmts: D1PreparedStatement[]) => {
              if (stmts.some((s) => poisoned.has(s))) throw new Error("D1_ERROR: disk I/O error");
              return target.batch(stmts);
            };
          }
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    await changeActorEnv(key, { databases: failing });
    const delivered = scriptedWorld(() => ({ text: "unused" })).delivered;
    const stuck = (await rpc<{ runId: string }>("agent", { sessionKey: key, message: "doomed" })).payload
      .runId;
    // Alone in its session: its finalize is written through (a finalize written behind, while
    // another run waits, does not fail its run; D1's refusals of it are dead-lettered, see
    // records-journal.test.ts).
    await eventually(async () => ((await attemptsOf(key, stuck))?.attempts ?? 0) >= 1);
    await driveAttempts(key, stuck);

    const done = await waitRun(stuck);
    expect(done.status).toBe("error");
    expect(done.error).toContain("D1_ERROR: disk I/O error");
    const run = await rpc<{ status: string; error: string }>("runs.get", { runId: stuck });
    expect(run.payload.status).toBe("error");
    const next = await say(id, "after the doomed one");
    await runDurableObjectAlarm(actor(key));
    expect((await waitRun(next)).status).toBe("ok");
    expect(delivered.some((d) => String(d.body.text).includes("after the doomed one"))).toBe(true);
  });
});
