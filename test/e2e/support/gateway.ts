/**
 * The gateway under test: `wrangler dev` started by `scripts/lib/local-server.ts` with a given
 * SWITCHBOARD_CONFIG, plus small HTTP clients for the operator RPC surface and signed inbound
 * webhooks, and bounded polling.
 */
import "./workers-crypto.ts";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { executeLocalD1, type LocalServer, startLocalServer } from "../../../scripts/lib/local-server.ts";
import { SIGNATURE_HEADER, signBody } from "../../../src/auth/signature.ts";

export const GATEWAY_TOKEN = "e2e-gateway-token";
export const CONNECTOR_SECRET = "e2e-connector-secret";

/**
 * The D1 databases every gateway of the suite spreads its sessions over (SPEC §19):
 * `SWITCHBOARD_TEST_D1=N` gives DB and N-1 more (DB_1, DB_2, …), each a local database of its
 * own, migrated, named in the config's `storage.d1`; unset, wrangler.toml's DB alone, and the
 * config says nothing of storage. A test config with a `storage` of its own keeps it.
 */
export const TEST_D1: readonly string[] = testDatabases(process.env.SWITCHBOARD_TEST_D1);

function testDatabases(value: string | undefined): readonly string[] {
  if (value === undefined || value === "") return ["DB"];
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 8) {
    throw new Error(`SWITCHBOARD_TEST_D1 must be a number of D1 databases from 1 to 8 (got "${value}")`);
  }
  return ["DB", ...Array.from({ length: n - 1 }, (_, i) => `DB_${i + 1}`)];
}

/** `config` with the suite's `storage.d1` (TEST_D1), unless it has a `storage` of its own. */
export function withTestStorage(config: Record<string, unknown>): Record<string, unknown> {
  return TEST_D1.length === 1 || "storage" in config ? config : { ...config, storage: { d1: TEST_D1 } };
}

/** The D1 bindings a gateway with `config` needs declared: its storage.d1. */
function bindingsOf(config: Record<string, unknown>): readonly string[] {
  return (config.storage as { d1?: string[] } | undefined)?.d1 ?? ["DB"];
}

/** Every request the tests make gives up after this long instead of hanging the suite. */
const REQUEST_TIMEOUT_MS = 30_000;

export interface RpcAnswer<T> {
  status: number;
  ok: boolean;
  payload: T;
  error?: { code: string; message: string };
}

export interface InboundAnswer {
  status: number;
  /** Wall time from sending the request to reading the whole answer. */
  ms: number;
  body: {
    ok: boolean;
    sessionKey?: string;
    sessionId?: string;
    runId?: string;
    status?: "queued" | "duplicate" | "command";
    error?: { code: string; message: string };
  };
}

export interface GatewayOptions {
  config: Record<string, unknown>;
  /** Extra vars/secrets; GATEWAY_TOKEN and CONNECTOR_SECRET are always set. */
  vars?: Record<string, string>;
  /** Reuse a persistence directory (D1 + Durable Objects) to simulate a restart. */
  persistTo?: string;
}

export interface Gateway {
  url: string;
  persistTo: string;
  server: LocalServer;
  options: GatewayOptions;
  rpc<T = Record<string, unknown>>(method: string, params?: unknown): Promise<RpcAnswer<T>>;
  /** Like `rpc`, but throws unless the answer is `{ ok: true }`; returns the payload. */
  call<T = Record<string, unknown>>(method: string, params?: unknown): Promise<T>;
  inbound(
    channel: string,
    body: unknown,
    opts?: { secret?: string; at?: number; signature?: string | null },
  ): Promise<InboundAnswer>;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Each statement's rows of `sql` in the D1 database `binding` (one of its storage.d1). Only
   * once the gateway is stopped: its workerd must not share the SQLite files.
   */
  queryD1<T = Record<string, unknown>>(binding: string, sql: string): Promise<T[][]>;
  /** Stops the server and deletes its temporary persistence directory. */
  dispose(): Promise<void>;
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const config = withTestStorage(options.config);
  const server = await startLocalServer({
    config,
    d1: bindingsOf(config),
    vars: { GATEWAY_TOKEN, CONNECTOR_SECRET, ...options.vars },
    ...(options.persistTo ? { persistTo: options.persistTo } : {}),
  });
  const url = server.url;

  const fetchPath = (path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, { ...init, signal: init.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

  const rpc = async <T>(method: string, params: unknown = {}): Promise<RpcAnswer<T>> => {
    const res = await fetchPath(`/rpc/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(params),
    });
    const body = (await res.json()) as Omit<RpcAnswer<T>, "status">;
    return { status: res.status, ...body };
  };

  return {
    url,
    persistTo: server.persistTo,
    server,
    options,
    rpc,
    async call<T>(method: string, params: unknown = {}) {
      const answer = await rpc<T>(method, params);
      if (!answer.ok) {
        throw new Error(`rpc ${method} answered ${answer.status}: ${JSON.stringify(answer.error)}`);
      }
      return answer.payload;
    },
    async inbound(channel, body, opts = {}) {
      const raw = typeof body === "string" ? body : JSON.stringify(body);
      const signature =
        opts.signature === undefined
          ? await signBody(opts.secret ?? CONNECTOR_SECRET, raw, opts.at)
          : opts.signature;
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (signature !== null) headers[SIGNATURE_HEADER] = signature;
      const started = performance.now();
      const res = await fetchPath(`/hooks/inbound/${channel}`, { method: "POST", headers, body: raw });
      const text = await res.text();
      const ms = performance.now() - started;
      let parsed: InboundAnswer["body"];
      try {
        parsed = JSON.parse(text) as InboundAnswer["body"];
      } catch {
        throw new Error(`inbound answered ${res.status} with a non-JSON body: ${text.slice(0, 200)}`);
      }
      return { status: res.status, ms, body: parsed };
    },
    fetch: fetchPath,
    stop: (signal) => server.stop(signal),
    queryD1: (binding, sql) => executeLocalD1(server.persistTo, binding, sql, bindingsOf(config)),
    async dispose() {
      await server.stop();
      // Only ever the launcher's own temporary directories.
      const dir = path.resolve(server.persistTo);
      if (path.dirname(dir) === path.resolve(tmpdir()) && path.basename(dir).startsWith("switchboard-")) {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Polls `check` until it returns a truthy value and returns that value. Bounded twice: by
 * `timeoutMs` and by a maximum number of polls, so a fast-failing check cannot spin.
 */
export async function waitFor<T>(
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs: number,
  { intervalMs = 50, what = "condition" }: { intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  const maxPolls = Math.ceil(timeoutMs / intervalMs) + 1;
  for (let poll = 0; poll < maxPolls; poll++) {
    const value = await check();
    if (value) return value;
    if (Date.now() >= deadline) break;
    await sleep(intervalMs);
  }
  throw new Error(`${what} not met within ${timeoutMs}ms`);
}

/**
 * Waits until nothing more will happen to session `key` unless something new arrives: its actor
 * has no run queued or running (its `session_status`), and each delivery it owes has an outcome
 * (`deliveries.list` of the session, which has the actor record what it holds first): delivered,
 * or dead after its last attempt. A test that shows a duplicate never comes checks its counts
 * after this, not after a sleep: a second run would be queued or running, a second attempt owed.
 * Several keys are waited for together.
 */
export async function settled(gw: Gateway, keys: string | string[], timeoutMs = 30_000): Promise<void> {
  for (const key of typeof keys === "string" ? [keys] : keys) {
    await waitFor(
      async () => {
        const res = await gw.fetch("/tools/invoke", {
          method: "POST",
          headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ tool: "session_status", sessionKey: key, args: {} }),
        });
        const status = (await res.json()) as { result?: { queueDepth?: number; runStatus?: string } };
        if (status.result?.queueDepth !== 0 || status.result.runStatus === "running") return false;
        const page = await gw.call<{ deliveries: Array<{ status: string }> }>("deliveries.list", {
          sessionKey: key,
        });
        return page.deliveries.every((d) => d.status === "delivered" || d.status === "dead");
      },
      timeoutMs,
      { intervalMs: 100, what: `session ${key} settled (nothing queued or running, no delivery owed)` },
    );
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A direct-message inbound body with sensible defaults. */
export function directMessage(
  fields: { messageId: string; from: string; text: string } & Record<string, unknown>,
) {
  return { chatType: "direct", ...fields };
}

/** Config pieces every suite shares: one telegram connector pointing at the fake connector. */
export function connectorConfig(deliverUrl: string) {
  return { telegram: { deliverUrl, secretEnv: "CONNECTOR_SECRET" } };
}

/**
 * One tool through POST /tools/invoke, acting as `sessionKey` (default `main`); its result, or an
 * error naming the status and the tool's error.
 */
export async function invokeTool<T = Record<string, unknown>>(
  gw: Pick<Gateway, "fetch">,
  tool: string,
  args: Record<string, unknown>,
  sessionKey?: string,
): Promise<T> {
  const res = await gw.fetch("/tools/invoke", {
    method: "POST",
    headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tool, args, ...(sessionKey ? { sessionKey } : {}) }),
  });
  const body = (await res.json()) as { ok: boolean; result: T; error?: unknown };
  if (res.status !== 200 || !body.ok)
    throw new Error(`${tool} answered ${res.status}: ${JSON.stringify(body.error)}`);
  return body.result;
}
