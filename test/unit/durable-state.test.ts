import { describe, expect, it } from "vitest";
import { cachedDecode, DurableDocumentError } from "../../src/runs/durable";
import { entryCodec, progressCodec, queuedRunCodec } from "../../src/session/durable-state";
import { newSessionRow } from "../../src/session/entry";

const init = { agentId: "main", kind: "group", chatType: "group" as const, channel: "telegram" };
const entry = newSessionRow("agent:main:telegram:group:g1", init, 1_700_000_000_000, "s-1");

describe("durable documents", () => {
  it("round-trips a document through its versioned envelope", () => {
    const raw = entryCodec.encode(entry);
    expect(JSON.parse(raw)).toMatchObject({ v: 1, d: { key: entry.key } });
    expect(entryCodec.decode(raw)).toEqual(entry);
  });

  it("reads a document written before versions existed (bare JSON) as version 0", () => {
    expect(entryCodec.decode(JSON.stringify(entry))).toEqual(entry);
  });

  it("refuses a document written by a newer deploy, naming both versions", () => {
    const raw = JSON.stringify({ v: 2, d: entry });
    expect(() => entryCodec.decode(raw)).toThrow(DurableDocumentError);
    expect(() => entryCodec.decode(raw)).toThrow(
      "stored session entry is version 2, written by a newer deploy; this one reads up to version 1",
    );
  });

  it("refuses a document that does not match its schema, naming the field", () => {
    const raw = JSON.stringify({ v: 1, d: { ...entry, inputTokens: "12" } });
    expect(() => entryCodec.decode(raw)).toThrow(
      /stored session entry \(version 1\) is invalid at inputTokens/,
    );
    const spec = JSON.stringify({ v: 1, d: { sessionId: "s", req: { runId: "r" } } });
    expect(() => queuedRunCodec.decode(spec)).toThrow(/stored queued run \(version 1\) is invalid at req\./);
    expect(() => progressCodec.decode(`{"startedAt": 1, "loop": {`)).toThrow(
      "stored run progress is not JSON",
    );
  });

  it("keeps fields a newer deploy added within the same version", () => {
    const raw = JSON.stringify({ v: 1, d: { ...entry, addedLater: true } });
    expect(entryCodec.decode(raw)).toMatchObject({ addedLater: true });
  });

  it("checks a cached document once per written value, and hands every reader its own copy", () => {
    const decode = cachedDecode(entryCodec);
    const raw = entryCodec.encode(entry);
    const a = decode(raw);
    a.label = "changed by a reader";
    expect(decode(raw).label).toBe(entry.label);
    expect(() => decode(JSON.stringify({ v: 3, d: entry }))).toThrow(DurableDocumentError);
  });
});
