/**
 * The start check of placement (SPEC §19): a gateway started with another `storage.d1` than its
 * databases were placed with serves nothing until the rebalance, and says so.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readPlacementRecord, writePlacementRecord } from "../../src/db/placement-check";
import { app } from "../../src/http/app";
import { TOKEN } from "./support";

const BASE = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const FOUR = ["DB", "DB_1", "DB_2", "DB_3"];
const withList = (d1: string[]) => ({
  ...env,
  SWITCHBOARD_CONFIG: JSON.stringify({ ...BASE, storage: { d1 } }),
});
const binding = (name: string) => (env as unknown as Record<string, D1Database>)[name] as D1Database;

describe("placement at start", () => {
  it("records the list in a database with none, and refuses another list until the rebalance", async () => {
    // New databases: none records a list yet (the test setup recorded the project's).
    for (const name of FOUR) await binding(name).prepare("delete from storage_placement").run();
    const one = withList(["DB"]);
    expect((await app.request("/healthz", {}, one)).status).toBe(200);
    expect((await readPlacementRecord(binding("DB"))).recorded).toEqual(["DB"]);

    const four = withList(FOUR);
    for (const [path, init] of [
      ["/healthz", {}],
      ["/rpc/sessions.list", { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: "{}" }],
    ] as const) {
      const res = await app.request(path, init, four);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("UNAVAILABLE");
      expect(body.error.message).toContain(
        'storage.d1 is ["DB", "DB_1", "DB_2", "DB_3"], but the rows in DB were placed with ["DB"]',
      );
      expect(body.error.message).toContain("switchboard storage rebalance");
    }
    // The rebalance's own methods are not refused (they fix it).
    const rebalance = await app.request(
      "/rpc/storage.verify",
      { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: "{}" },
      four,
    );
    expect(rebalance.status).not.toBe(503);

    // Once every database records the new list (what the rebalance does when it has verified),
    // the gateway serves with it, and the old list is refused.
    for (const name of FOUR) await writePlacementRecord(binding(name), FOUR, Date.now());
    expect((await app.request("/healthz", {}, withList(FOUR))).status).toBe(200);
    expect((await app.request("/healthz", {}, withList(["DB"]))).status).toBe(503);
    for (const name of FOUR) await writePlacementRecord(binding(name), ["DB"], Date.now());
  });

  it("names a binding of the list the Worker does not have", async () => {
    const res = await app.request("/healthz", {}, withList(["DB", "DB_9"]));
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
      'storage.d1[1]: no D1 binding named "DB_9" (declare it in wrangler.toml: [[d1_databases]] binding = "DB_9")',
    );
  });
});
