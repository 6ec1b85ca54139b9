import { describe, expect, it } from "vitest";
import { dm, inbound, rpc } from "./support";

// Its own file: storage is isolated per file, so "nothing written" means an empty index.
describe("inbound validation", () => {
  const cases: Array<[string, () => Promise<Response>, number, RegExp]> = [
    [
      "a bad signature",
      () => inbound("telegram", dm("x"), { secret: "wrong-secret" }),
      401,
      /signature does not match/,
    ],
    [
      "a stale timestamp",
      () => inbound("telegram", dm("x"), { at: Date.now() - 10 * 60_000 }),
      401,
      /away from now/,
    ],
    [
      "a missing field",
      () => inbound("telegram", { messageId: "v1", chatType: "direct", text: "x" }),
      400,
      /`from` is required/,
    ],
    [
      "a wrong type",
      () => inbound("telegram", { ...dm("x"), chatType: 7 }),
      400,
      /`chatType` must be one of/,
    ],
    ["a group without groupId", () => inbound("telegram", { ...dm("x"), chatType: "group" }), 400, /groupId/],
    ["malformed JSON", () => inbound("telegram", '{"messageId": "v2",'), 400, /not valid JSON/],
    [
      "an unknown field",
      () => inbound("telegram", { ...dm("x"), colour: "red" }),
      400,
      /unknown field `colour`/,
    ],
    [
      "a 2 MB body",
      () => inbound("telegram", { ...dm("x"), text: "a".repeat(2 * 1024 * 1024) }),
      413,
      /larger than/,
    ],
    ["an unknown channel", () => inbound("nosuch", dm("x")), 404, /unknown channel "nosuch"/],
  ];
  for (const [name, send, status, message] of cases) {
    it(`refuses ${name} with ${status} and writes nothing`, async () => {
      const res = await send();
      expect(res.status).toBe(status);
      const body = (await res.json()) as { ok: boolean; error: { code: string; message: string } };
      expect(body.ok).toBe(false);
      expect(body.error.message).toMatch(message);
      const sessions = await rpc<{ count: number }>("sessions.list", {});
      expect(sessions.payload.count).toBe(0);
      const deliveries = await rpc<{ deliveries: unknown[] }>("deliveries.list", {});
      expect(deliveries.payload.deliveries).toEqual([]);
    });
  }
});
