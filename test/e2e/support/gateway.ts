/**
 * The gateway under test: `wrangler dev` started by `scripts/lib/local-server.ts` with a given
 * SWITCHBOARD_CONFIG, plus small HTTP clients for the operator RPC surface and signed inbound
 * webhooks, and bounded polling.
 */
import "./workers-crypto.ts";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type LocalServer, startLocalServer } from "../../../scripts/lib/local-server.ts";
import { SIGNATURE_HEADER, signBody } from "../../../src/auth/signature.ts";

export const GATEWAY_TOKEN = "e2e-gateway-token";
export const CONNECTOR_SECRET = "e2e-connector-secret";

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
  /** Stops the server and deletes its temporary persistence directory. */
  dispose(): Promise<void>;
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const server = await startLocalServer({
    config: options.config,
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
