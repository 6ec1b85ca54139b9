import { describe, expect, it } from "vitest";
import type { FlowMeta, RunOutcome } from "../../src/runs/types";
import { buildAnnouncement, nextExchangeStep, REPLY_SKIP } from "../../src/session/flows/plans";
import { formatDuration, formatTokens } from "../../src/views/format";

const A = "agent:main:telegram:group:a";
const B = "agent:main:telegram:group:b";

function flow(extra: Partial<FlowMeta> = {}): FlowMeta {
  return {
    flowId: "f1",
    hop: 1,
    requesterKey: A,
    targetKey: B,
    phase: "primary",
    round: 0,
    maxRounds: 5,
    originalMessage: "what is 2+2?",
    requesterInit: { agentId: "main", kind: "group", chatType: "group", channel: "telegram" },
    ...extra,
  };
}

const ok = (reply: string): RunOutcome => ({ runId: "r", status: "ok", reply });

describe("sessions_send exchange", () => {
  it("sends the target's reply back to the requester as round 1", () => {
    const next = nextExchangeStep(flow(), B, ok("4"));
    expect(next).toMatchObject({ sessionKey: A, trigger: "a2a_reply", idSeed: "f1:round:1", deliver: false });
    expect(next?.flow).toMatchObject({ phase: "reply", round: 1, firstReply: "4", latestReply: "4" });
    expect(next?.text).toContain(`[reply from ${B}]\n4`);
    expect(next?.text).toContain(REPLY_SKIP);
  });

  it("alternates requester and target until maxRounds, then announces in the target", () => {
    let f = flow({ maxRounds: 3 });
    let at = B;
    const visited: string[] = [];
    for (let i = 0; i < 10; i++) {
      const next = nextExchangeStep(f, at, ok(`reply ${i}`));
      if (!next) break;
      visited.push(`${next.trigger}@${next.sessionKey === A ? "A" : "B"}`);
      if (next.trigger === "announce") break;
      f = next.flow;
      at = next.sessionKey;
    }
    expect(visited).toEqual(["a2a_reply@A", "a2a_reply@B", "a2a_reply@A", "announce@B"]);
  });

  it("ends the rounds on REPLY_SKIP or an empty reply and announces the latest real reply", () => {
    const round1 = nextExchangeStep(flow(), B, ok("4"))!;
    const skip = nextExchangeStep(round1.flow, A, ok(" REPLY_SKIP "));
    expect(skip).toMatchObject({ sessionKey: B, trigger: "announce", deliver: true, idSeed: "f1:announce" });
    expect(skip?.text).toContain("Original request: what is 2+2?");
    expect(skip?.text).toContain("Your first reply: 4");
    expect(skip?.text).toContain("Latest reply: 4");
    expect(nextExchangeStep(round1.flow, A, ok(""))?.trigger).toBe("announce");
  });

  it("goes straight to the announce step with maxPingPongTurns 0 or a self-send", () => {
    expect(nextExchangeStep(flow({ maxRounds: 0 }), B, ok("4"))?.trigger).toBe("announce");
    expect(nextExchangeStep(flow({ targetKey: A }), A, ok("4"))?.trigger).toBe("announce");
  });

  it("stops after a failed primary run and after the announce step", () => {
    expect(nextExchangeStep(flow(), B, { runId: "r", status: "error", error: "429" })).toBeUndefined();
    expect(nextExchangeStep(flow({ phase: "announce" }), B, ok("posted"))).toBeUndefined();
  });
});

describe("sub-agent announcement", () => {
  const task = {
    runId: "t",
    status: "ok" as const,
    reply: "the answer is 42",
    startedAt: 0,
    endedAt: 62_000,
    inputTokens: 800,
    outputTokens: 400,
  };
  const base = {
    childKey: "agent:main:subagent:x",
    childSessionId: "s-1",
    transcriptPath: "/v1/transcripts/s-1.jsonl",
  };

  it("normalizes Status, Result and Stats", () => {
    const text = buildAnnouncement({ ...base, task, announce: ok("Found it: 42") });
    expect(text?.split("\n")).toEqual([
      "Status: ok",
      "Result: Found it: 42",
      "Stats: runtime 1m02s • tokens 1.2k (in 800 / out 400) • sessionKey agent:main:subagent:x • sessionId s-1 • transcript /v1/transcripts/s-1.jsonl",
    ]);
  });

  it("takes Status from the runtime outcome and the error into Notes", () => {
    const failed = {
      ...task,
      status: "error" as const,
      reply: undefined,
      error: "provider error 429 rate limited",
    };
    const text = buildAnnouncement({
      ...base,
      task: failed,
      announce: { runId: "a", status: "error", error: "429 again" },
    });
    expect(text).toContain("Status: error\n");
    expect(text).toContain("Notes: provider error 429 rate limited; announce step: 429 again");
  });

  it("falls back to the final reply, then the latest tool result", () => {
    const failedAnnounce: RunOutcome = { runId: "a", status: "error", error: "x" };
    expect(buildAnnouncement({ ...base, task, announce: failedAnnounce })).toContain(
      "Result: the answer is 42",
    );
    const toolOnly = { ...task, reply: "", lastToolResult: '{"iso":"2026-11-23"}' };
    expect(buildAnnouncement({ ...base, task: toolOnly, announce: ok("") })).toContain(
      'Result: {"iso":"2026-11-23"}',
    );
  });

  it("stays silent on ANNOUNCE_SKIP", () => {
    expect(buildAnnouncement({ ...base, task, announce: ok("ANNOUNCE_SKIP") })).toBeUndefined();
  });

  it("formats durations and token counts compactly", () => {
    expect([formatDuration(5_400), formatDuration(62_000), formatDuration(3_723_000)]).toEqual([
      "5s",
      "1m02s",
      "1h02m03s",
    ]);
    expect([formatTokens(999), formatTokens(1200), formatTokens(15_000), formatTokens(2_500_000)]).toEqual([
      "999",
      "1.2k",
      "15k",
      "2.5M",
    ]);
  });
});
