import { describe, expect, it } from "vitest";
import { runIdFor, runIdPrefix, runIdPrefixOfKey } from "../../src/keys/run-id";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("run ids that name their session", () => {
  it("are UUIDs (version 8), stable for the same session and seed", async () => {
    const a = await runIdFor("agent:main:telegram:dm:1", "inbound:telegram:default:42");
    expect(a).toMatch(UUID);
    expect(await runIdFor("agent:main:telegram:dm:1", "inbound:telegram:default:42")).toBe(a);
    expect(await runIdFor("agent:main:telegram:dm:1", "inbound:telegram:default:43")).not.toBe(a);
    expect(await runIdFor("agent:main:telegram:dm:2", "inbound:telegram:default:42")).not.toBe(a);
  });

  it("random without a seed, yet every one starts with its session's prefix", async () => {
    const key = "agent:main:main";
    const prefix = runIdPrefixOfKey(key);
    const ids = await Promise.all(Array.from({ length: 20 }, () => runIdFor(key)));
    expect(new Set(ids).size).toBe(20);
    for (const id of ids) {
      expect(id).toMatch(UUID);
      expect(runIdPrefix(id)).toBe(prefix);
    }
    expect(runIdPrefix(await runIdFor("agent:main:other"))).not.toBe(prefix);
  });

  it("reads the prefix of an id in any case", async () => {
    const id = await runIdFor("cron:digest", "x");
    expect(runIdPrefix(id.toUpperCase())).toBe(runIdPrefix(id));
    expect(runIdPrefix(id)).toHaveLength(18);
  });
});
