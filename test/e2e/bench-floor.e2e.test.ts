/**
 * The bench's platform-floor Workers under their own `wrangler dev`. The read floor
 * (bench/floor/worker.ts, row 9f of `npm run bench`): seeded once (again changes nothing), its
 * read answers a 50-row page of listing-shaped rows newest first, from one database or merged
 * from four, and its /healthz answers like the gateway's. The message floor
 * (bench/floor/message-worker.ts, `npm run ab -- floor`): a signed message is answered 202, its
 * reply (the model's) reaches the connector signed, once, and a repeat is a duplicate.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startConnector, startModel, workloadVars } from "../../bench/workload.ts";
import { type LocalServer, startLocalServer } from "../../scripts/lib/local-server.ts";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature.ts";

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

  it("reads the newest 50 of four databases' pages", async () => {
    const res = await post("/read", { tool: "sessions_list", args: { limit: 50 }, databases: 4 });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as {
      result: { count: number; sessions: Array<Record<string, unknown>> };
    };
    expect(result.count).toBe(50);
    // Each database holds 60 rows numbered on from the one before; the newest are the first's.
    expect(result.sessions.map((s) => s.key)).toEqual(
      Array.from({ length: 50 }, (_, i) => `agent:main:subagent:floor-${i + 1}`),
    );
  });
});

describe("the bench's message floor Worker", () => {
  it("answers a signed message 202, delivers the model's reply once, and a repeat is a duplicate", async () => {
    const connector = await startConnector();
    const model = await startModel();
    const server = await startLocalServer({
      persistTo: mkdtempSync(path.join(tmpdir(), "switchboard-message-floor-e2e-")),
      migrate: false,
      wranglerConfig: path.join(root, "bench/floor/message.wrangler.toml"),
      vars: {
        ...workloadVars,
        FLOOR_MODEL_URL: model.url,
        FLOOR_DELIVER_URL: `http://127.0.0.1:${connector.port}/deliver`,
      },
    });
    try {
      const body = JSON.stringify({ messageId: "m-1", chatType: "direct", from: "ann", text: "hi" });
      const send = async (signature: string) =>
        fetch(`${server.url}/hooks/inbound/telegram`, {
          method: "POST",
          headers: { "content-type": "application/json", [SIGNATURE_HEADER]: signature },
          body,
        });
      const secret = workloadVars.CONNECTOR_SECRET;
      expect((await send(await signBody("not the secret", body))).status).toBe(401);
      const first = await send(await signBody(secret, body));
      expect(first.status).toBe(202);
      expect(await first.json()).toMatchObject({ ok: true, status: "queued", runId: "m-1" });
      await connector.until(1, 30_000);
      expect(connector.delivered()).toBe(1);
      expect(model.calls()).toBe(1);
      const again = await send(await signBody(secret, body));
      expect(await again.json()).toMatchObject({ ok: true, status: "duplicate" });
      expect(model.calls()).toBe(1);
    } finally {
      await server.stop();
      rmSync(server.persistTo, { recursive: true, force: true });
      connector.close();
      model.close();
    }
  }, 120_000);
});
