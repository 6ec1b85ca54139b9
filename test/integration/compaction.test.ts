/**
 * Compaction and the memory flush (SPEC §5): a long conversation on a model with a small window
 * keeps running, every message stays in the transcript next to the compaction entries, each
 * model call after a compaction carries the summary and only the messages after it, the silent
 * flush turn saves notes another session of the agent can read and never reaches the chat;
 * `/compact`, `sessions.compact` and a failing summarizer.
 */
import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { COMPACTION_PROMPT, MEMORY_FLUSH_PROMPT } from "../../src/agent/compaction";
import { getSession } from "../../src/db/queries";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  CONNECTORS,
  group,
  groupMessage,
  history,
  type ModelAnswer,
  type ModelRequest,
  SCRIPTED_MODEL_CONFIG,
  scriptedWorld,
} from "./model-support";
import { withActorConfig } from "./rpc-support";
import { actor, changeActorEnv, eventually, inbound, rpc, TOKEN, waitRun } from "./support";

let restore: (() => void) | undefined;
afterEach(() => restore?.());

/** A 2,000-token window, and only the memory tools, so the prompt's fixed part stays small. */
function smallWindowConfig(extra: Record<string, unknown> = {}) {
  return {
    ...SCRIPTED_MODEL_CONFIG,
    models: {
      ...SCRIPTED_MODEL_CONFIG.models,
      providers: {
        fake: { api: "openai-compatible", baseUrl: "https://model.test/v1", contextWindow: 2000 },
      },
    },
    tools: { allow: ["memory_write", "memory_read"] },
    connectors: CONNECTORS,
    ...extra,
  };
}

const PADDING = "lorem ipsum dolor sit amet ".repeat(6);
const isSummarizer = (r: ModelRequest) => r.system.startsWith(COMPACTION_PROMPT.slice(0, 40));
const isFlush = (r: ModelRequest) =>
  r.messages.some((m) => JSON.stringify(m.content ?? "").includes("[memory flush]"));
const turnsIn = (text: string) => [...text.matchAll(/turn (\d+):/g)].map((m) => Number(m[1]));

/** The scripted model of a long conversation: summaries, flush notes, and padded replies. */
function conversationModel(note: string) {
  let summaries = 0;
  return (r: ModelRequest): ModelAnswer => {
    if (isSummarizer(r)) {
      summaries++;
      const through = Math.max(...turnsIn(r.lastUser));
      return { text: `SUMMARY ${summaries} through turn ${through}.` };
    }
    if (isFlush(r)) {
      return r.lastRole === "tool"
        ? { text: "NO_NOTES" }
        : { tool: "memory_write", args: { key: "flush-fact", text: `${note} (flush ${summaries + 1})` } };
    }
    return { text: `reply to ${r.lastUser.slice(0, 12)} ${PADDING}` };
  };
}

async function say(groupId: string, text: string): Promise<string> {
  const res = await inbound("telegram", groupMessage(groupId, text));
  expect(res.status).toBe(202);
  const { runId } = (await res.json()) as { runId: string };
  return runId;
}

const entryOf = (key: string) => getSession(env, key);

describe("compaction", () => {
  it("keeps a 200-turn conversation on a 2,000-token window running on summaries, losing no message", async () => {
    const note = `the user prefers tea ${crypto.randomUUID()}`;
    const world = scriptedWorld(conversationModel(note));
    restore = world.restore;
    const id = `long-${crypto.randomUUID().slice(0, 8)}`;
    const key = group(id);
    await withActorConfig(key, smallWindowConfig());

    for (let turn = 1; turn <= 200; turn++) {
      const runId = await say(id, `turn ${turn}: ${PADDING}`);
      const done = await waitRun(runId, 30_000);
      expect(done.status, `turn ${turn}`).toBe("ok");
    }

    // Every message is stored, plus the compaction entries, and the count matches.
    const transcript = await history(key);
    const users = transcript.filter((m) => m.role === "user" && /^turn \d+:/.test(text(m)));
    expect(users.map((m) => turnsIn(text(m))[0])).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(
      transcript.filter((m) => m.role === "assistant" && text(m).startsWith("reply to turn")),
    ).toHaveLength(200);
    const entries = transcript.filter((m) => m.compaction);
    const summarizerCalls = world.requests.filter(isSummarizer);
    expect(entries.length).toBeGreaterThanOrEqual(10);
    expect(entries).toHaveLength(summarizerCalls.length);
    expect((await entryOf(key))?.compactionCount).toBe(entries.length);
    for (const e of entries) {
      expect(e.role).toBe("system");
      expect(e.compaction?.firstKeptSeq).toBeGreaterThan(0);
    }
    // The flush turns' messages name the run that compacted, one runs.get knows.
    const flushRuns = [...new Set(transcript.filter((m) => m.id.includes(":flush:")).map((m) => m.runId))];
    expect(flushRuns.length).toBeGreaterThan(0);
    for (const runId of flushRuns) {
      expect((await rpc("runs.get", { runId })).status, `runs.get ${runId}`).toBe(200);
    }

    // After each compaction, a turn's request carries that summary and only later messages;
    // each compaction was preceded by the flush turn.
    let latest: { n: number; through: number } | undefined;
    let flushesSinceSummary = 0;
    let checked = 0;
    for (const r of world.requests) {
      if (isFlush(r)) {
        if (r.lastRole !== "tool") flushesSinceSummary++;
        continue;
      }
      if (isSummarizer(r)) {
        expect(flushesSinceSummary, "a flush turn precedes each automatic compaction").toBe(1);
        flushesSinceSummary = 0;
        const through = Math.max(...turnsIn(r.lastUser));
        latest = { n: (latest?.n ?? 0) + 1, through };
        continue;
      }
      const sent = r.messages.filter((m) => m.role !== "system");
      expect(sent.length).toBeLessThanOrEqual(40);
      if (!latest) continue;
      expect(r.system).toContain(`SUMMARY ${latest.n} through turn ${latest.through}.`);
      const userTurns = sent
        .filter((m) => m.role === "user")
        .flatMap((m) => turnsIn(JSON.stringify(m.content)));
      expect(Math.min(...userTurns)).toBeGreaterThan(latest.through);
      checked++;
    }
    expect(checked).toBeGreaterThan(150);

    // Nothing of the flush turns reached the chat: 200 replies, none of them a flush answer.
    const posted = world.delivered;
    expect(posted.filter((d) => JSON.stringify(d.body).includes("NO_NOTES"))).toHaveLength(0);
    expect(
      posted.filter((d) => JSON.stringify(d.body).includes(MEMORY_FLUSH_PROMPT.slice(0, 20))),
    ).toHaveLength(0);
    expect(posted.filter((d) => JSON.stringify(d.body).includes("reply to turn"))).toHaveLength(200);

    // The note the flush saved is read by another session of the same agent.
    const other = `reader-${crypto.randomUUID().slice(0, 8)}`;
    world.restore();
    const reader = scriptedWorld((r) =>
      r.lastRole === "tool" ? { text: "found it" } : { tool: "memory_read", args: { query: "prefers tea" } },
    );
    restore = reader.restore;
    await withActorConfig(group(other), smallWindowConfig());
    expect((await waitRun(await say(other, "what do I like?"))).status).toBe("ok");
    const read = (await history(group(other))).find((m) => m.role === "toolResult");
    expect(text(read!)).toContain(note);
  }, 240_000);
});

describe("/compact, sessions.compact and failures", () => {
  async function conversation(id: string, turns: number) {
    for (let turn = 1; turn <= turns; turn++) {
      expect((await waitRun(await say(id, `turn ${turn}: ${PADDING}`))).status).toBe("ok");
    }
  }

  it("/compact <instructions> answers as a command, passes the instructions to the summarizer, and posts a notice", async () => {
    const world = scriptedWorld(conversationModel("unused"));
    restore = world.restore;
    const id = `cmd-${crypto.randomUUID().slice(0, 8)}`;
    await withActorConfig(group(id), smallWindowConfig());
    await conversation(id, 4);

    const res = await inbound("telegram", groupMessage(id, "/compact focus on decisions"));
    const ack = (await res.json()) as { status: string; runId: string };
    expect(ack.status).toBe("command");
    expect((await waitRun(ack.runId)).status).toBe("ok");

    const summarizer = world.requests.filter(isSummarizer);
    expect(summarizer).toHaveLength(1);
    expect(summarizer[0]!.system).toContain(
      "Additional instructions from the user for this summary: focus on decisions",
    );
    // A command compaction has no flush turn.
    expect(world.requests.some(isFlush)).toBe(false);
    const notice = world.delivered.at(-1)!;
    expect(notice.body.kind).toBe("notice");
    expect(String(notice.body.text)).toMatch(/^Compacted: \d+ messages summarized/);
    const run = await rpc<{ trigger: string; status: string }>("runs.get", { runId: ack.runId });
    expect(run.payload).toMatchObject({ trigger: "compact", status: "ok" });
    expect((await entryOf(group(id)))?.compactionCount).toBe(1);

    // sessions_history shows the compaction entry as such, like chat.history.
    const res2 = await exports.default.fetch("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({
        tool: "sessions_history",
        sessionKey: group(id),
        args: { sessionKey: group(id) },
      }),
    });
    const seen = ((await res2.json()) as { result: { messages: TranscriptMessage[] } }).result.messages;
    const entry = seen.find((m) => m.compaction);
    expect(entry).toMatchObject({ role: "system", compaction: { firstKeptSeq: expect.any(Number) } });
    expect(text(entry!)).toBe("SUMMARY 1 through turn 4.");

    // The next turn carries the summary and none of the summarized turns.
    expect((await waitRun(await say(id, `turn 5: ${PADDING}`))).status).toBe("ok");
    const last = world.requests.at(-1)!;
    expect(last.system).toContain("SUMMARY 1 through turn 4.");
    expect(last.messages.filter((m) => m.role !== "system")).toHaveLength(1);
  });

  it("sessions.compact returns a runId that agent.wait settles", async () => {
    const world = scriptedWorld(conversationModel("unused"));
    restore = world.restore;
    const id = `rpc-${crypto.randomUUID().slice(0, 8)}`;
    await withActorConfig(group(id), smallWindowConfig());
    await conversation(id, 3);
    const res = await rpc<{ runId: string }>("sessions.compact", {
      key: group(id),
      instructions: "be brief",
    });
    expect(res.status).toBe(200);
    expect((await waitRun(res.payload.runId)).status).toBe("ok");
    expect(world.requests.filter(isSummarizer)[0]!.system).toContain("be brief");
    // Delivered nothing: an operator compaction posts no notice.
    expect(world.delivered.filter((d) => d.body.kind === "notice")).toHaveLength(0);
    const missing = await rpc("sessions.compact", { key: group("no-such-group-x") });
    expect(missing.status).toBe(404);
    const bad = await rpc("sessions.compact", { key: group(id), instructions: "" });
    expect(bad.status).toBe(400);
  });

  it("a summarizer that fails leaves the context as it was, says why, and the session goes on", async () => {
    let failing = true;
    const model = conversationModel("unused");
    const world = scriptedWorld((r) =>
      isSummarizer(r) && failing ? { status: 500, error: "summarizer exploded" } : model(r),
    );
    restore = world.restore;
    const id = `fail-${crypto.randomUUID().slice(0, 8)}`;
    const key = group(id);
    await withActorConfig(key, smallWindowConfig());
    await conversation(id, 3);
    const before = await history(key);

    const res = await rpc<{ runId: string }>("sessions.compact", { key });
    const done = await waitRun(res.payload.runId);
    expect(done.status).toBe("error");
    expect(done.error).toContain("summarizer exploded");
    expect(await history(key)).toEqual(before);
    expect((await entryOf(key))?.compactionCount).toBe(0);

    // An automatic compaction that fails is recorded as its own run; the turn still answers.
    for (let turn = 4; turn <= 30; turn++) {
      expect((await waitRun(await say(id, `turn ${turn}: ${PADDING}`))).status).toBe("ok");
    }
    const runs = world.requests.filter(isSummarizer).length;
    expect(runs).toBeGreaterThan(1);
    expect((await entryOf(key))?.compactionCount).toBe(0);
    const all = await history(key);
    expect(all.filter((m) => m.compaction)).toHaveLength(0);
    const compactRunId = all.find((m) => m.runId?.endsWith(":compact"))?.runId;
    expect(compactRunId).toBeDefined();
    const run = await rpc<{ trigger: string; status: string; error: string }>("runs.get", {
      runId: compactRunId,
    });
    expect(run.payload).toMatchObject({ trigger: "compact", status: "error" });
    expect(run.payload.error).toContain("summarizer exploded");

    failing = false;
    expect((await waitRun(await say(id, `turn 31: ${PADDING}`))).status).toBe("ok");
    expect((await entryOf(key))?.compactionCount).toBe(1);
  });
});

describe("a compaction interrupted by a failed write", () => {
  it("resumes from its checkpoint: the summary is made once, the entry appended once", async () => {
    const world = scriptedWorld(conversationModel("unused"));
    restore = world.restore;
    const id = `resume-${crypto.randomUUID().slice(0, 8)}`;
    const key = group(id);
    await withActorConfig(key, smallWindowConfig());
    for (let turn = 1; turn <= 3; turn++) {
      expect((await waitRun(await say(id, `turn ${turn}: ${PADDING}`))).status).toBe("ok");
    }
    // From now on every D1 batch of this actor after the first (the enqueue) fails.
    let failures = 0;
    let batches = 0;
    const crashing = (db: D1Database) =>
      new Proxy(db, {
        get(target, prop, receiver) {
          if (prop === "batch") {
            return async (stmts: D1PreparedStatement[]) => {
              if (++batches > 1) {
                failures++;
                throw new Error("simulated crash: the process died here");
              }
              return target.batch(stmts);
            };
          }
          const value = Reflect.get(target, prop, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    await changeActorEnv(key, { config: smallWindowConfig(), databases: crashing });
    const res = await rpc<{ runId: string }>("sessions.compact", { key });
    await eventually(async () => failures > 0);
    expect(world.requests.filter(isSummarizer)).toHaveLength(1);
    // The instance dies; the retried alarm runs with a healthy binding and the real config.
    await abortAllDurableObjects();
    await withActorConfig(key, smallWindowConfig());
    await runDurableObjectAlarm(actor(key));
    expect((await waitRun(res.payload.runId)).status).toBe("ok");
    expect(world.requests.filter(isSummarizer)).toHaveLength(1);
    const entries = (await history(key)).filter((m) => m.compaction);
    expect(entries).toHaveLength(1);
    expect((await entryOf(key))?.compactionCount).toBe(1);
  });
});

describe("/context", () => {
  it("names every tool and shows a window share consistent with /status", async () => {
    const world = scriptedWorld(conversationModel("unused"));
    restore = world.restore;
    const id = `ctx-${crypto.randomUUID().slice(0, 8)}`;
    await withActorConfig(group(id), { ...smallWindowConfig(), tools: {} });
    expect((await waitRun(await say(id, `turn 1: ${PADDING}`))).status).toBe("ok");

    const notice = async (command: string) => {
      const before = world.delivered.length;
      await inbound("telegram", groupMessage(id, command));
      return eventually(async () => {
        const d = world.delivered.slice(before).find((x) => x.body.kind === "notice");
        return d && String(d.body.text);
      });
    };
    const list = await notice("/context list");
    const status = await notice("/status");
    const detail = await notice("/context detail");
    for (const tool of [
      "sessions_list",
      "sessions_history",
      "sessions_send",
      "sessions_spawn",
      "agents_list",
      "session_status",
      "memory_read",
      "memory_write",
    ]) {
      expect(list).toContain(tool);
      expect(detail).toContain(`- ${tool}: ~`);
    }
    // The last call's share is the one /status shows.
    const share = /Last call: .*\(([\d.]+%)\)/.exec(list)?.[1];
    expect(share).toBeDefined();
    expect(status).toContain(share!);
    expect(list).toMatch(/Context of the next call \(estimated\): ~[\d.k]+ \/ 2k tokens \([\d.]+%\)/);
    expect(detail).toContain("Largest messages:");
    expect(detail).toContain("System prompt sections:");
  });
});

function text(m: Pick<TranscriptMessage, "content">): string {
  return m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
}
