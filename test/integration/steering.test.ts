/**
 * Steering a running turn (SPEC §20): with `session.queue.mode` `steer` (or `/steer`), a message
 * that arrives while a run is running joins it before its next model step; tool calls the model
 * asked for that had not started get "Skipped to process an incoming message."; each steered
 * message is its own user message, in arrival order; when the run ends before a next step the
 * message runs as a follow-up; a steer survives a crash. `interrupt` aborts the running run and
 * runs the message next.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { SKIPPED_FOR_STEER } from "../../src/agent/loop";
import { parseConfig } from "../../src/config/load";
import { sessionsSendTool } from "../../src/tools/sessions-send";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  crash,
  expectTurn,
  heldTurn,
  line,
  repliesTo,
  restoreWorlds,
  scene,
  scripted,
  send,
  setupActor,
  transcriptOf,
} from "./lifecycle-world";
import { groupMessage } from "./model-support";
import { httpToolContext } from "./rpc-support";
import { actor, drain, eventually, inbound, rpc, waitRun } from "./support";

afterEach(restoreWorlds);

const steering = (mode = "steer") => scripted({ session: { writeBehind: true, queue: { mode } } });

describe("steer", () => {
  it("joins the running turn before its next step; the tool call not started yet is skipped", async () => {
    const id = "steer-tool";
    const { w, key } = await scene(id, { config: steering() });
    // The first answer asks for a tool; it is held until the steering message has arrived.
    const first = await heldTurn(w, id, "first", "current_time");
    const second = await send(id, "second");
    expect(second).toMatchObject({ status: "steered", runId: first.runId });
    const third = await send(id, "third");
    expect(third).toMatchObject({ status: "steered", runId: first.runId });
    w.holdModel = false;

    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    const transcript = await transcriptOf(key);
    expect(transcript.map(line)).toEqual([
      "user:first",
      "assistant:toolCall",
      `toolResult:${SKIPPED_FOR_STEER}`,
      "user:second",
      "user:third",
      "assistant:re: second | third",
    ]);
    // The model's next step saw the skipped call and both messages, in arrival order.
    expect(w.requests[1]?.map((m) => `${m.role}:${m.text}`)).toEqual([
      "user:first",
      "assistant:",
      `tool:${SKIPPED_FOR_STEER}`,
      "user:second",
      "user:third",
    ]);
    expect(repliesTo(w, first.runId).map((d) => d.body.text)).toEqual(["re: second | third"]);
    // The skipped call is a span of the run's timeline (SPEC §21).
    const run = await rpc<{ timeline: Array<{ phase: string; name?: string; outcome?: string }> }>(
      "runs.get",
      {
        runId: first.runId,
      },
    );
    expect(run.payload.timeline.filter((s) => s.phase === "tool")).toMatchObject([
      { name: "current_time", outcome: "skipped" },
    ]);
  });

  it("runs a message that came after the last step as a follow-up, which answers that message", async () => {
    const id = "steer-late";
    const { w, key } = await scene(id, { config: steering() });
    const first = await heldTurn(w, id, "first");
    const message = groupMessage(id, "second");
    const second = (await (await inbound("telegram", message)).json()) as { status: string };
    expect(second.status).toBe("steered");
    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    await eventually(async () => w.delivered.some((d) => d.body.text === "re: second"));
    await drain(key);
    // The follow-up's reply is threaded to the message it answers, not to the first one.
    const replies = w.delivered.map((d) => [d.body.text, d.body.replyToMessageId]);
    expect(replies).toContainEqual(["re: second", message.messageId]);
    expect(replies.filter(([, to]) => to === message.messageId)).toHaveLength(1);
    expect((await transcriptOf(key)).map(line)).toEqual([
      "user:first",
      "assistant:re: first",
      "user:second",
      "assistant:re: second",
    ]);
  });

  it("a steering message survives a crash of the running turn", async () => {
    const id = "steer-crash";
    const { w, key } = await scene(id, { config: steering() });
    const first = await heldTurn(w, id, "first", "current_time");
    expect((await send(id, "second")).status).toBe("steered");
    await crash(w);
    await setupActor(key, w, { config: steering() });
    await runDurableObjectAlarm(actor(key));
    // The resumed turn starts its first step again, and the steering message joins it before.
    await expectTurn(w, key, first.runId, ["user:first", "user:second", "assistant:re: first | second"]);
  });

  it("/steer steers whatever the mode", async () => {
    const id = "steer-command";
    const { w, key } = await scene(id, { config: steering("followup") });
    const first = await heldTurn(w, id, "first", "current_time");
    // In followup mode a plain message queues; /steer joins the turn.
    expect((await send(id, "/steer look here")).status).toBe("steered");
    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    expect((await transcriptOf(key)).map(line).slice(-2)).toEqual([
      "user:look here",
      "assistant:re: look here",
    ]);
  });
});

describe("/queue", () => {
  it("sets the session's mode, which a later message follows, and shows it", async () => {
    const id = "queue-command";
    const { w, key } = await scene(id, { config: steering("followup") });
    const notices = () => w.delivered.filter((d) => d.body.kind === "notice").map((d) => d.body.text);
    await send(id, "/queue steer");
    await eventually(async () => notices().includes("Queue mode: steer for this session."));
    expect((await rpc<{ queueMode?: string }>("sessions.get", { key })).payload.queueMode).toBe("steer");
    await send(id, "/queue");
    await eventually(async () => notices().includes("Queue mode: steer (set with /queue)."));
    await send(id, "/queue sideways");
    await eventually(async () => notices().includes("Usage: /queue followup|collect|steer|interrupt"));

    const first = await heldTurn(w, id, "first");
    expect(await send(id, "second")).toMatchObject({ status: "steered", runId: first.runId });
    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
  });
});

describe("sessions_send modes", () => {
  it("notify adds the message to the target's transcript without a run; steer joins its running turn", async () => {
    const id = "send-modes";
    const { w, key } = await scene(id, { config: steering("followup") });
    await waitRun((await send(id, "hello")).runId);
    const config = parseConfig(JSON.stringify({ tools: { sessions: { visibility: "all" } } }));
    const ctx = (sessionKey: string) => httpToolContext(sessionKey, config);

    const calls = w.requests.length;
    const noted = await sessionsSendTool.execute(
      { sessionKey: key, message: "for your records", mode: "notify" },
      ctx("agent:main:main"),
    );
    expect(noted).toEqual({ status: "noted", sessionKey: key });
    const last = (await transcriptOf(key)).at(-1);
    expect(last).toMatchObject({
      role: "user",
      provenance: { kind: "inter_session", sourceSessionKey: "agent:main:main" },
    });
    expect(line(last as TranscriptMessage)).toBe("user:for your records");
    expect(w.requests.length).toBe(calls);

    const running = await heldTurn(w, id, "work", "current_time");
    const steered = await sessionsSendTool.execute(
      { sessionKey: key, message: "also this", mode: "steer", timeoutSeconds: 0 },
      ctx("agent:main:main"),
    );
    expect(steered).toEqual({ status: "steered", runId: running.runId, sessionKey: key });
    w.holdModel = false;
    expect(await waitRun(running.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    expect((await transcriptOf(key)).map(line).slice(-2)).toEqual([
      "user:also this",
      "assistant:re: also this",
    ]);
  });
});

describe("what a message steers", () => {
  it("never a run whose reply no chat sees: during an agent's send, a person's message runs on its own", async () => {
    const id = "steer-not-a-send";
    const { w, key } = await scene(id, { config: steering() });
    await waitRun((await send(id, "hello")).runId);
    const config = parseConfig(JSON.stringify({ tools: { sessions: { visibility: "all" } } }));
    const before = w.requests.length;
    w.holdModel = true;
    const sent = (await sessionsSendTool.execute(
      { sessionKey: key, message: "agent work", timeoutSeconds: 0 },
      httpToolContext("agent:main:main", config),
    )) as { runId: string };
    await eventually(async () => w.requests.length === before + 1);

    const person = await send(id, "are you there?");
    expect(person.status).toBe("queued");
    expect(person.runId).not.toBe(sent.runId);
    w.holdModel = false;
    expect(await waitRun(sent.runId)).toMatchObject({ status: "ok" });
    expect(await waitRun(person.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    expect(repliesTo(w, person.runId).map((d) => d.body.text)).toEqual(["re: are you there?"]);
  });
});

describe("interrupt", () => {
  it("aborts the running run and runs the new message next", async () => {
    const id = "interrupt";
    const { w, key } = await scene(id, { config: steering("interrupt") });
    const first = await heldTurn(w, id, "first");
    const second = await send(id, "second");
    expect(second.status).toBe("queued");
    expect(await waitRun(first.runId)).toMatchObject({ status: "aborted" });
    w.holdModel = false;
    expect(await waitRun(second.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    expect(repliesTo(w, second.runId)).toHaveLength(1);
    expect(repliesTo(w, first.runId)).toHaveLength(0);
  });
});
