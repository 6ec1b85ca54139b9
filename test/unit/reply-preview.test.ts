/**
 * The pace of a reply's preview (SPEC §22 streaming, session/run/preview.ts) on a virtual clock:
 * a 30-second streamed answer makes at most one call per `minIntervalMs`, the first preview
 * waits for 40 characters or a second, `settle` puts the reply's own edit an interval after the last
 * edit, a resumed run edits the preview it had, and repeated failures end the previews.
 */
import { describe, expect, it } from "vitest";
import type { PreviewResult } from "../../src/connectors/types";
import { ReplyPreview } from "../../src/session/run/preview";

function world(opts: { mode?: "partial" | "progress"; minIntervalMs?: number; fail?: boolean } = {}) {
  let now = 0;
  const calls: Array<{ at: number; text: string; messageId: string | undefined }> = [];
  const kept: string[] = [];
  const port = {
    mode: opts.mode ?? ("partial" as const),
    minIntervalMs: opts.minIntervalMs ?? 1_000,
    show: async (text: string, messageId: string | undefined): Promise<PreviewResult> => {
      calls.push({ at: now, text, messageId });
      return opts.fail ? { ok: false, error: "refused" } : { ok: true, messageId: messageId ?? "m1" };
    },
  };
  const clock = { now: () => now };
  return {
    calls,
    kept,
    advance: (ms: number) => {
      now += ms;
    },
    preview: (messageId?: string) => new ReplyPreview(port, messageId, (id) => kept.push(id), clock),
  };
}

/** Lets the preview's call under way settle (its promise callbacks). */
const flush = () => new Promise((r) => setTimeout(r, 0));

describe("a reply's preview", () => {
  it("a 30-second stream: at most one call per second, the first one posted, the rest edits of it", async () => {
    const w = world();
    const p = w.preview();
    let text = "";
    // 600 pieces, 50 ms apart: 30 seconds of a model writing.
    for (let i = 0; i < 600; i++) {
      text += `w${i} `;
      p.text(text);
      await flush();
      w.advance(50);
    }
    const settled = await p.settle();
    expect(settled?.messageId).toBe("m1");
    expect(w.kept).toEqual(["m1"]);
    expect(w.calls[0]?.messageId).toBeUndefined();
    expect(w.calls.slice(1).every((c) => c.messageId === "m1")).toBe(true);
    for (let i = 1; i < w.calls.length; i++)
      expect((w.calls[i]?.at ?? 0) - (w.calls[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(1_000);
    // About one a second over 30 seconds, never more.
    expect(w.calls.length).toBeGreaterThanOrEqual(28);
    expect(w.calls.length).toBeLessThanOrEqual(31);
    // The reply's own edit is due a full interval after the last preview call, or now.
    const last = w.calls.at(-1)?.at ?? 0;
    expect(settled?.notBefore === undefined || settled.notBefore === last + 1_000).toBe(true);
  });

  it("the first preview waits for 40 characters, or for a second of a slow reply", async () => {
    const w = world();
    const p = w.preview();
    p.text("Hello");
    await flush();
    expect(w.calls).toHaveLength(0);
    p.text("Hello there, this is a longer sentence now");
    await flush();
    expect(w.calls).toHaveLength(1);

    const slow = world();
    const q = slow.preview();
    q.text("Hi");
    slow.advance(999);
    q.text("Hi,");
    await flush();
    expect(slow.calls).toHaveLength(0);
    slow.advance(1);
    q.text("Hi, I");
    await flush();
    expect(slow.calls.map((c) => c.text)).toEqual(["Hi, I"]);
  });

  it("settle puts the reply's edit an interval after the last call, so it keeps the pace", async () => {
    const w = world({ minIntervalMs: 1_200 });
    const p = w.preview();
    p.text("x".repeat(30));
    p.text("x".repeat(50));
    await flush();
    w.advance(300);
    expect(await p.settle()).toEqual({ messageId: "m1", notBefore: 1_200 });
    // No call after settle.
    p.text("y".repeat(80));
    await flush();
    expect(w.calls).toHaveLength(1);
  });

  it("the reply's edit need not wait when the preview shows the reply already (it changes nothing)", async () => {
    const w = world();
    const p = w.preview();
    const reply = "a reply that came in two pieces, long enough to preview";
    p.text(reply.slice(0, 20));
    p.text(reply);
    await flush();
    expect(w.calls.map((c) => c.text)).toEqual([reply]);
    expect(await p.settle(reply)).toEqual({ messageId: "m1" });
  });

  it("a reply that arrives in one piece is never previewed: it is posted as the reply", async () => {
    const w = world();
    const p = w.preview();
    p.text("a whole reply at once, far longer than forty characters");
    w.advance(5_000);
    await flush();
    expect(await p.settle("a whole reply at once, far longer than forty characters")).toBeUndefined();
    expect(w.calls).toEqual([]);
  });

  it("a resumed run edits the preview it had and keeps nothing new", async () => {
    const w = world();
    const p = w.preview("m7");
    p.text("short");
    await flush();
    expect(w.calls).toEqual([{ at: 0, text: "short", messageId: "m7" }]);
    expect(w.kept).toEqual([]);
  });

  it("progress shows what the run does and ignores the text; without a preview settle has nothing to say", async () => {
    const w = world({ mode: "progress" });
    const p = w.preview();
    p.text("some reply text that is long enough to be previewed");
    p.progress("Thinking…");
    await flush();
    expect(w.calls.map((c) => c.text)).toEqual(["Thinking…"]);
    const none = world();
    expect(await none.preview().settle()).toBeUndefined();
  });

  it("three failures in a row end the previews", async () => {
    const w = world({ fail: true });
    const p = w.preview();
    p.text("z");
    for (let i = 0; i < 10; i++) {
      p.text(`${"z".repeat(50)}${i}`);
      await flush();
      w.advance(1_000);
    }
    expect(w.calls).toHaveLength(3);
    expect(await p.settle()).toBeUndefined();
  });
});
