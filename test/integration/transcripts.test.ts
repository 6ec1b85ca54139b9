import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { recordTranscript } from "../../src/db/queries";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  exportTranscript,
  jsonLines,
  seedMessages,
  seedSessions,
  sessionRow,
  transcriptMessages,
} from "./rpc-support";
import { dm, fakeConnector, inbound, rpc, waitRun } from "./support";

interface Line {
  type: string;
  id: string;
  parentId?: string | null;
  timestamp: number;
  sessionKey?: string;
  version?: number;
  message?: Record<string, unknown>;
}

/** The stored message as the export shows it: everything but its id and seq. */
function exported(m: TranscriptMessage) {
  const { id: _id, seq: _seq, ...message } = m;
  return message;
}

describe("GET /v1/transcripts/:sessionId.jsonl", () => {
  it("needs the operator bearer token", async () => {
    const [row] = await seedSessions([sessionRow({ key: "agent:tx:dm:auth", agentId: "tx" })]);
    const none = await exportTranscript(`${row!.sessionId}.jsonl`, null);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe("UNAUTHORIZED");
    const wrong = await exportTranscript(`${row!.sessionId}.jsonl`, "not-the-token");
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({
      ok: false,
      error: { code: "UNAUTHORIZED", message: "invalid bearer token" },
    });
  });

  it("exports a run's transcript: a session header, then one line per message chained by parentId", async () => {
    const connector = fakeConnector();
    const res = await inbound(
      "telegram",
      dm("export me", { chatType: "group", groupId: "tx-room", from: "ann" }),
    );
    const ack = (await res.json()) as { runId: string; sessionKey: string; sessionId: string };
    await waitRun(ack.runId);
    const history = await rpc<{ messages: TranscriptMessage[] }>("chat.history", {
      sessionKey: ack.sessionKey,
    });

    const file = await exportTranscript(`${ack.sessionId}.jsonl`);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const lines = (await jsonLines(file)) as unknown as Line[];
    expect(lines).toHaveLength(3);
    expect(lines[0]).toEqual({
      type: "session",
      version: 1,
      id: ack.sessionId,
      sessionKey: "agent:main:telegram:group:tx-room",
      timestamp: expect.any(Number),
    });
    const [user, assistant] = history.payload.messages;
    expect(lines[1]).toEqual({
      type: "message",
      id: user!.id,
      parentId: null,
      timestamp: user!.timestamp,
      message: exported(user!),
    });
    expect(lines[2]).toEqual({
      type: "message",
      id: assistant!.id,
      parentId: user!.id,
      timestamp: assistant!.timestamp,
      message: exported(assistant!),
    });
    expect(lines[1]!.message).toMatchObject({
      role: "user",
      content: [{ type: "text", text: "export me" }],
      runId: ack.runId,
      provenance: { kind: "external_user", sourceChannel: "telegram" },
    });
    expect(lines[2]!.message).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text: "echo: export me" }],
      model: "echo/echo",
    });
    connector.restore();
  });

  it("writes the header's timestamp as the transcript's creation time", async () => {
    const sessionId = crypto.randomUUID();
    await recordTranscript(env, sessionId, "agent:tx:dm:stamped", 1_650_000_000_000);
    const lines = (await jsonLines(await exportTranscript(`${sessionId}.jsonl`))) as unknown as Line[];
    expect(lines).toEqual([
      {
        type: "session",
        version: 1,
        id: sessionId,
        sessionKey: "agent:tx:dm:stamped",
        timestamp: 1_650_000_000_000,
      },
    ]);
  });

  it("exports tool calls and tool results with all their fields", async () => {
    const [row] = await seedSessions([sessionRow({ key: "agent:tx:dm:tools", agentId: "tx" })]);
    const messages = transcriptMessages("tools", 6, { toolEvery: 3 });
    await seedMessages(row!.sessionId, messages);
    const lines = (await jsonLines(await exportTranscript(`${row!.sessionId}.jsonl`))) as unknown as Line[];
    expect(lines.slice(1)).toEqual(
      messages.map((m, i) => ({
        type: "message",
        id: m.id,
        parentId: i === 0 ? null : messages[i - 1]!.id,
        timestamp: m.timestamp,
        message: exported(m),
      })),
    );
    expect(lines[3]!.message).toEqual({
      role: "toolResult",
      content: [{ type: "text", text: '{"n":3}' }],
      toolCallId: "call-tools-3",
      toolName: "current_time",
      isError: false,
      timestamp: messages[2]!.timestamp,
    });
  });

  it("streams a transcript of more than 500 messages completely, in order", async () => {
    const [row] = await seedSessions([sessionRow({ key: "agent:tx:dm:long", agentId: "tx" })]);
    const count = 1203;
    await seedMessages(row!.sessionId, transcriptMessages("long", count, { toolEvery: 7 }));
    const res = await exportTranscript(`${row!.sessionId}.jsonl`);
    expect(res.status).toBe(200);
    const lines = (await jsonLines(res)) as unknown as Line[];
    expect(lines).toHaveLength(count + 1);
    expect(lines[0]).toMatchObject({ type: "session", id: row!.sessionId, sessionKey: "agent:tx:dm:long" });
    const body = lines.slice(1);
    expect(body.map((l) => l.id)).toEqual(Array.from({ length: count }, (_, i) => `long-${i + 1}`));
    expect(body.every((l) => l.type === "message")).toBe(true);
    expect(body[0]!.parentId).toBeNull();
    for (let i = 1; i < body.length; i++) expect(body[i]!.parentId).toBe(body[i - 1]!.id);
    // Page boundaries (500, 1000) join without a gap or a repeat.
    expect(body[500]).toMatchObject({ id: "long-501", parentId: "long-500" });
    expect(body[1000]).toMatchObject({ id: "long-1001", parentId: "long-1000" });
  });

  it("exports an empty transcript as the header alone", async () => {
    const [row] = await seedSessions([sessionRow({ key: "agent:tx:dm:empty", agentId: "tx" })]);
    const lines = await jsonLines(await exportTranscript(`${row!.sessionId}.jsonl`));
    expect(lines).toEqual([
      {
        type: "session",
        version: 1,
        id: row!.sessionId,
        sessionKey: "agent:tx:dm:empty",
        timestamp: row!.createdAt,
      },
    ]);
  });

  it("answers an unknown sessionId with 404 NOT_FOUND", async () => {
    const res = await exportTranscript("00000000-0000-4000-8000-000000000000.jsonl");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      ok: false,
      error: { code: "NOT_FOUND", message: "transcript not found: 00000000-0000-4000-8000-000000000000" },
    });
  });

  it("answers a file name without .jsonl with 404", async () => {
    const [row] = await seedSessions([sessionRow({ key: "agent:tx:dm:ext", agentId: "tx" })]);
    for (const file of [row!.sessionId, `${row!.sessionId}.json`, `${row!.sessionId}.jsonl.gz`]) {
      const res = await exportTranscript(file);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("NOT_FOUND");
    }
  });

  it("keeps each reset's transcript under its own sessionId", async () => {
    const first = await rpc<{ runId: string; sessionKey: string; sessionId: string }>("agent", {
      sessionKey: "agent:main:tx-reset",
      message: "before",
    });
    await waitRun(first.payload.runId);
    const reset = await rpc<{ sessionId: string }>("sessions.reset", { key: "agent:main:tx-reset" });
    const second = await rpc<{ runId: string; sessionId: string }>("chat.send", {
      sessionKey: "agent:main:tx-reset",
      message: "after",
    });
    await waitRun(second.payload.runId);
    expect(second.payload.sessionId).toBe(reset.payload.sessionId);

    const texts = async (sessionId: string) =>
      ((await jsonLines(await exportTranscript(`${sessionId}.jsonl`))) as unknown as Line[])
        .slice(1)
        .map((l) => (l.message as { content: Array<{ text: string }> }).content[0]!.text);
    expect(await texts(first.payload.sessionId)).toEqual(["before", "echo: before"]);
    expect(await texts(reset.payload.sessionId)).toEqual(["after", "echo: after"]);
  });
});
