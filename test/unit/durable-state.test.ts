import { describe, expect, it } from "vitest";
import { DurableDocumentError } from "../../src/runs/durable";
import { newSessionRow } from "../../src/session/entry/rules";
import { entryCodec, progressCodec, queuedRunCodec } from "../../src/session/storage/documents";

const init = { agentId: "main", kind: "group", chatType: "group" as const, channel: "telegram" };
const entry = newSessionRow("agent:main:telegram:group:g1", init, 1_700_000_000_000, "s-1");

describe("durable documents", () => {
  it("round-trips a document, its version kept in a reserved key", () => {
    const raw = entryCodec.encode(entry);
    expect(JSON.parse(raw)).toEqual({ _v: 1, ...entry });
    expect(entryCodec.decode(raw)).toEqual(entry);
  });

  it("reads a document written before versions existed (no version key) as version 0", () => {
    expect(entryCodec.decode(JSON.stringify(entry))).toEqual(entry);
    // An entry saved before later columns existed gets their defaults.
    const { expiredAt: _e, expiresAt: _x, compactionCount: _c, ...older } = entry;
    expect(entryCodec.decode(JSON.stringify(older))).toEqual({
      ...entry,
      expiredAt: null,
      expiresAt: null,
      compactionCount: 0,
    });
    // There is no step from version 0: what the current schema refuses is refused, naming it.
    const { inputTokens: _i, ...unversioned } = entry;
    expect(() => entryCodec.decode(JSON.stringify({ ...unversioned, inputTokens: "12" }))).toThrow(
      /stored session entry \(version 0\) is invalid at inputTokens/,
    );
  });

  it("refuses a document written by a newer deploy, naming both versions", () => {
    const raw = JSON.stringify({ _v: 2, ...entry });
    expect(() => entryCodec.decode(raw)).toThrow(expect.objectContaining({ newer: true }));
    expect(() => entryCodec.decode(raw)).toThrow(
      "stored session entry is version 2, written by a newer deploy; this one reads up to version 1",
    );
  });

  it("refuses a document that does not match its schema, naming the field", () => {
    const raw = JSON.stringify({ _v: 1, ...entry, inputTokens: "12" });
    expect(() => entryCodec.decode(raw)).toThrow(
      /stored session entry \(version 1\) is invalid at inputTokens/,
    );
    const spec = JSON.stringify({ _v: 1, sessionId: "s", req: { runId: "r" } });
    expect(() => queuedRunCodec.decode(spec)).toThrow(/stored queued run \(version 1\) is invalid at req\./);
    expect(() => progressCodec.decode(`{"startedAt": 1, "loop": {`)).toThrow(
      "stored run progress is not JSON",
    );
  });

  it("keeps fields a newer deploy added within the same version", () => {
    const raw = JSON.stringify({ _v: 1, ...entry, addedLater: true });
    expect(entryCodec.decode(raw)).toMatchObject({ addedLater: true });
  });

  it("parses a document it wrote or checked without checking it again; each read gets its own copy", () => {
    const raw = entryCodec.encode(entry);
    const a = entryCodec.decode(raw);
    a.label = "changed by a reader";
    expect(entryCodec.decode(raw)).toEqual(entry);
    // A stored document it did not write is checked (and refused when wrong) every time.
    const wrong = JSON.stringify({ _v: 1, ...entry, inputTokens: "12" });
    expect(() => entryCodec.decode(wrong)).toThrow(DurableDocumentError);
    expect(() => entryCodec.decode(wrong)).toThrow(DurableDocumentError);
  });
});
