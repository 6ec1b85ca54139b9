/**
 * A sub-agent announcement reaches the requester's chat once, however often it is posted: the
 * sub-agent's hand-off is retried when its run's attempt fails after the post (SPEC §6, §14).
 */
import { runInDurableObject } from "cloudflare:test";
import { afterEach, expect, it } from "vitest";
import type { Announcement } from "../../src/session/flows/handoff";
import { actor, dm, eventually, fakeConnector, inbound, waitRun } from "./support";

let restore: (() => void) | undefined;
afterEach(() => restore?.());

it("delivers an announcement posted twice once, and records it once", async () => {
  const connector = fakeConnector();
  restore = connector.restore;
  const group = `ann-${crypto.randomUUID().slice(0, 8)}`;
  const key = `agent:main:telegram:group:${group}`;
  const ack = (await (await inbound("telegram", dm("hi", { chatType: "group", groupId: group }))).json()) as {
    runId: string;
  };
  await waitRun(ack.runId);
  await eventually(async () => connector.delivered.length === 1);
  const announcement: Announcement = {
    id: `${crypto.randomUUID()}:announcement`,
    text: "Status: ok\nResult: done",
    sourceSessionKey: "agent:main:subagent:child",
    init: { agentId: "main", kind: "group", chatType: "group", channel: "telegram" },
  };
  expect(await actor(key).postAnnouncement(key, announcement)).toEqual({ delivered: true });
  await eventually(async () => connector.delivered.some((d) => d.body.kind === "announce"));
  // The repeat adds no delivery (the first one is settled: delivered).
  expect(await actor(key).postAnnouncement(key, announcement)).toEqual({ delivered: false });
  const owed = await runInDurableObject(
    actor(key),
    (_instance, state) =>
      state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM outbox WHERE done = 0`).one().n,
  );
  expect(owed).toBe(0);
  expect(connector.delivered.filter((d) => d.body.kind === "announce")).toHaveLength(1);
});
