/**
 * State awareness (SPEC §20): each session's signal log of material changes (a message, a run's
 * end, a settings change, a reset), its newest version as `stateVersion` on `sessions_list` rows
 * and `session_status`, and `session_status { changesSince }` answering the events since a
 * version, oldest first, with `historyGap` once older events are no longer kept.
 */
import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/http/app";
import type { SessionActor } from "../../src/session/actor";
import { SIGNALS_KEPT, type SignalLog } from "../../src/session/storage/signals";
import { hangingModel, SLOW_MODEL_CONFIG, withActorConfig } from "./rpc-support";
import { actor, actorSettled, configText, dm, eventually, inbound, rpc, TOKEN, waitRun } from "./support";

interface Status {
  stateVersion: number;
  stateChanges?: {
    events: Array<{
      version: number;
      kind: string;
      actor: string;
      summary: string;
      runId?: string;
      outcome?: string;
    }>;
    historyGap: boolean;
  };
}

async function status(sessionKey: string, changesSince?: number): Promise<Status> {
  const res = await app.fetch(
    new Request("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        tool: "session_status",
        sessionKey,
        args: changesSince === undefined ? {} : { changesSince },
      }),
    }),
    { ...env, SWITCHBOARD_CONFIG: configText(JSON.parse(env.SWITCHBOARD_CONFIG)) },
    createExecutionContext(),
  );
  const body = (await res.json()) as { ok: boolean; result: Status };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.result;
}

describe("the signal log", () => {
  it("records messages, run ends, settings changes and resets; stateVersion and changesSince show them", async () => {
    const from = `signals-${Date.now().toString(36)}`;
    const ack = (await (await inbound("telegram", dm("hello there", { from }))).json()) as {
      runId: string;
      sessionKey: string;
    };
    const key = ack.sessionKey;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await actorSettled(key);

    const first = await status(key, 0);
    expect(first.stateVersion).toBe(2);
    expect(first.stateChanges).toEqual({
      events: [
        expect.objectContaining({ version: 1, kind: "human_message", actor: "human" }),
        expect.objectContaining({ version: 2, kind: "run_completed", actor: "agent", runId: ack.runId }),
      ],
      historyGap: false,
    });
    // Never message content: the summary names who, not what.
    expect(JSON.stringify(first.stateChanges)).not.toContain("hello there");
    const listed = await rpc<{ sessions: Array<{ key: string; stateVersion: number }> }>("sessions.list", {
      limit: 200,
    });
    expect(listed.payload.sessions.find((s) => s.key === key)?.stateVersion).toBe(2);

    expect((await rpc("sessions.patch", { key, label: `${from}-label` })).status).toBe(200);
    expect((await rpc("sessions.reset", { key })).status).toBe(200);
    const later = await status(key, 2);
    expect(later.stateVersion).toBe(4);
    expect(later.stateChanges?.events.map((e) => [e.version, e.kind, e.actor])).toEqual([
      [3, "settings_changed", "human"],
      [4, "reset", "human"],
    ]);
    // Without changesSince: the version only.
    expect((await status(key)).stateChanges).toBeUndefined();
    expect((await status(key, 4)).stateChanges).toEqual({ events: [], historyGap: false });
  });

  it("a message the queue's cap refused records nothing", async () => {
    const groupId = `signals-cap-${Date.now().toString(36)}`;
    const key = `agent:main:telegram:group:${groupId}`;
    await withActorConfig(key, { ...SLOW_MODEL_CONFIG, session: { queue: { cap: 1 } } });
    const model = hangingModel();
    try {
      const send = (text: string) => inbound("telegram", dm(text, { chatType: "group", groupId }));
      expect((await send("running")).status).toBe(202);
      await eventually(async () => model.calls() === 1);
      expect((await send("waiting")).status).toBe(202);
      expect((await send("refused")).status).toBe(429);
      // Asked of the actor: a connector's messages reach D1 with their runs' ends (written behind).
      const seen = await actor(key).stateChanges(key, 0);
      expect(seen.events?.map((e) => e.kind)).toEqual(["human_message", "human_message"]);
      expect(seen.stateVersion).toBe(2);
    } finally {
      model.restore();
      await actor(key).abort(key, true);
    }
  });

  it(`keeps at most ${SIGNALS_KEPT} events: an older version is answered with historyGap`, async () => {
    const key = `agent:main:signals-gap-${Date.now().toString(36)}`;
    const result = await runInDurableObject(actor(key), async (instance: SessionActor) => {
      await instance.getEntry(key);
      const log = (instance as unknown as { store: { signals: SignalLog } }).store.signals;
      let latest = 0;
      for (let i = 0; i < SIGNALS_KEPT + 100; i++) {
        latest = log.record({ kind: "human_message", actor: "human", at: Date.now(), summary: `m${i}` });
      }
      return { latest, old: log.since(0, latest), recent: log.since(latest - 5, latest) };
    });
    expect(result.latest).toBe(SIGNALS_KEPT + 100);
    expect(result.old.historyGap).toBe(true);
    expect(result.old.events.length).toBeGreaterThan(0);
    expect(result.old.events[0]?.version).toBeGreaterThan(1);
    expect(result.recent).toMatchObject({ historyGap: false });
    expect(result.recent.events.map((e) => e.version)).toEqual([1096, 1097, 1098, 1099, 1100]);
  });
});
