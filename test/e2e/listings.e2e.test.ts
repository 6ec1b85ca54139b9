/**
 * Session listings end to end (SPEC §6, §17, §19): `sessions.list` pages newest first on one
 * (updatedAt, key) cursor while messages arrive, with no session listed twice and none skipped
 * that did not move. With SWITCHBOARD_TEST_D1=4 the sessions are spread over four D1 databases,
 * each page merged from all of them, and the last test reads each database to show where they are.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
  directMessage,
  type Gateway,
  startGateway,
  TEST_D1,
} from "./support/gateway.ts";

const SESSIONS = 24;
const PAGE = 5;

interface Row {
  key: string;
  updatedAt: number;
}
interface ListPage {
  count: number;
  sessions: Row[];
  nextCursor?: string;
}

let gw: Gateway;
let connector: FakeConnector;
/** Every session key the gateway was given a message for. */
const keys = new Set<string>();
/** Runs not waited for yet. */
const running: string[] = [];
let sent = 0;

async function say(peer: string, text: string): Promise<string> {
  const res = await gw.inbound("telegram", directMessage({ messageId: `list-${++sent}`, from: peer, text }));
  expect(res.status).toBe(202);
  const { sessionKey, runId } = res.body;
  if (!sessionKey || !runId)
    throw new Error(`inbound answered no session or run: ${JSON.stringify(res.body)}`);
  keys.add(sessionKey);
  running.push(runId);
  return sessionKey;
}

/** Waits until every run so far has ended (and its records are in D1). */
async function settle(): Promise<void> {
  for (const runId of running.splice(0)) {
    const wait = await gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 20_000 });
    expect(wait.status).toBe("ok");
  }
}

const newestFirst = (a: Row, b: Row) => b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : -1);
const below = (row: Row, last: Row) =>
  row.updatedAt < last.updatedAt || (row.updatedAt === last.updatedAt && row.key < last.key);

beforeAll(async () => {
  connector = await startFakeConnector(CONNECTOR_SECRET);
  gw = await startGateway({
    config: { connectors: connectorConfig(connector.url), session: { dmScope: "per-channel-peer" } },
  });
  for (let i = 0; i < SESSIONS; i++) await say(`peer-${i}`, `hello ${i}`);
  await settle();
});

afterAll(async () => {
  await gw?.dispose();
  await connector?.close();
});

describe("sessions.list paging", () => {
  it("lists every session once, in order, while messages move some and create others", async () => {
    const before = (await gw.call<ListPage>("sessions.list", { limit: 200 })).sessions;
    expect(before.map((r) => r.key).sort()).toEqual([...keys].sort());
    expect([...before].sort(newestFirst)).toEqual(before);

    const pages: Row[][] = [];
    const moved = new Set<string>();
    const created = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const res = await gw.call<ListPage>("sessions.list", { limit: PAGE, ...(cursor ? { cursor } : {}) });
      pages.push(res.sessions);
      cursor = res.nextCursor;
      if (!cursor) break;
      // Between pages: a message to a session already listed, one to a session not listed yet
      // (both move to the front, ahead of the cursor), and a new session. Their runs go on
      // while the next pages are read.
      const seen = new Set(pages.flat().map((r) => r.key));
      const ahead = before.find((r) => !seen.has(r.key) && !moved.has(r.key));
      const behind = before.find((r) => seen.has(r.key) && !moved.has(r.key));
      for (const row of [ahead, behind]) {
        if (!row) continue;
        moved.add(row.key);
        await say(row.key.split(":").at(-1) as string, `moved on page ${page}`);
      }
      created.add(await say(`late-${page}`, `new on page ${page}`));
    }
    expect(cursor).toBeUndefined();
    expect(moved.size).toBeGreaterThan(2);

    const seen = pages.flat();
    // No session twice.
    expect(new Set(seen.map((r) => r.key)).size).toBe(seen.length);
    // Every session that did not move, exactly once and in its order; none made after the first page.
    const still = before.filter((r) => !moved.has(r.key)).map((r) => r.key);
    expect(seen.map((r) => r.key).filter((k) => !moved.has(k))).toEqual(still);
    expect(seen.filter((r) => created.has(r.key))).toEqual([]);
    // Each page newest first, and below the last row of the page before it.
    for (const [i, page] of pages.entries()) {
      expect(page.length).toBeLessThanOrEqual(PAGE);
      expect([...page].sort(newestFirst)).toEqual(page);
      const last = pages[i - 1]?.at(-1);
      if (last) for (const row of page) expect(below(row, last)).toBe(true);
    }
  });

  it("pages, once nothing moves, to exactly the one-page listing", async () => {
    await settle();
    const whole = await gw.call<ListPage>("sessions.list", { limit: 200 });
    expect(whole.count).toBe(keys.size);
    expect(whole.sessions.map((r) => r.key).sort()).toEqual([...keys].sort());
    const paged: Row[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const res = await gw.call<ListPage>("sessions.list", { limit: 7, ...(cursor ? { cursor } : {}) });
      paged.push(...res.sessions);
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    expect(paged.map((r) => [r.key, r.updatedAt])).toEqual(whole.sessions.map((r) => [r.key, r.updatedAt]));
  });

  it(`keeps each session in one database of storage.d1 (${TEST_D1.join(", ")}), each holding some`, async () => {
    await settle();
    const listed = (await gw.call<ListPage>("sessions.list", { limit: 200 })).sessions.map((r) => r.key);
    // The databases are read once the gateway is down (its workerd holds their files).
    await gw.stop();
    const held: string[][] = [];
    for (const binding of TEST_D1) {
      const [rows] = await gw.queryD1<{ key: string }>(binding, "SELECT key FROM sessions");
      held.push((rows ?? []).map((r) => r.key));
    }
    expect(held.flat().sort()).toEqual([...listed].sort());
    for (const [i, inDb] of held.entries())
      expect(inDb.length, `sessions in ${TEST_D1[i]}`).toBeGreaterThan(0);
  });
});
