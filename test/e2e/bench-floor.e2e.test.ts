/**
 * The bench's platform-floor Worker (bench/floor/worker.ts, row 9f of `npm run bench`) under its
 * own `wrangler dev`: seeded once (again changes nothing), its read answers a 50-row page of
 * listing-shaped rows newest first, and its /healthz answers like the gateway's.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalServer, startLocalServer } from "../../scripts/lib/local-server.ts";

const root = path.resolve(import.meta.dirname, "../..");
let floor: LocalServer;

const post = (p: string, body: unknown) =>
  fetch(`${floor.url}${p}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });

beforeAll(async () => {
  floor = await startLocalServer({
    persistTo: mkdtempSync(path.join(tmpdir(), "switchboard-floor-e2e-")),
    migrate: false,
    wranglerConfig: path.join(root, "bench/floor/wrangler.toml"),
  });
}, 90_000);

afterAll(async () => {
  await floor?.stop();
  if (floor) rmSync(floor.persistTo, { recursive: true, force: true });
});

describe("the bench's floor Worker", () => {
  it("answers /healthz", async () => {
    const res = await fetch(`${floor.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, version: "floor" });
  });

  it("reads a page of 50 list-shaped rows, newest first, after an idempotent seed", async () => {
    expect((await post("/seed", { count: 60 })).status).toBe(200);
    expect((await post("/seed", { count: 60 })).status).toBe(200);
    const res = await post("/read", { tool: "sessions_list", args: { limit: 50 } });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as {
      result: { count: number; sessions: Array<Record<string, unknown>> };
    };
    expect(result.count).toBe(50);
    const first = result.sessions[0] ?? {};
    expect(first).toMatchObject({ key: "agent:main:subagent:floor-1", agentId: "main", kind: "other" });
    expect(first).not.toHaveProperty("label");
    // The 24 listed columns less the 7 this fixture leaves null, as a list row leaves nulls out.
    expect(Object.keys(first)).toHaveLength(17);
    const times = result.sessions.map((s) => s.updatedAt as number);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });
});
