/**
 * A fake chat connector on 127.0.0.1: the `deliverUrl` the gateway POSTs replies to. Every
 * attempt is recorded with its signature check; while "up" a correctly signed delivery is
 * answered 200 and recorded in `deliveries`, while "down" every attempt is answered 503.
 * Duplicates are recorded too (never dropped), so tests can prove there were none.
 * `onDelivery` lets a test act while the gateway's POST is still open: its hook runs for each
 * delivery about to be accepted and is awaited before the connector answers.
 */
import { listenOnLoopback } from "../../../scripts/lib/local-server.ts";
import "./workers-crypto.ts";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { SIGNATURE_HEADER, verifySignature } from "../../../src/auth/signature.ts";
import { readBody } from "./http-fake.ts";

/** The delivery body the gateway sends (SPEC §14). */
export interface DeliveryBody {
  deliveryId: string;
  kind: "reply" | "announce" | "notice";
  sessionKey: string;
  channel: string;
  accountId: string;
  to: string;
  threadId?: string;
  text: string;
  replyToMessageId?: string;
}

export interface DeliveryAttempt {
  /** Node clock when the request arrived. */
  at: number;
  path: string;
  status: number;
  signature: string | null;
  /** Result of `verifySignature` with the connector secret ("ok" or the reason it failed). */
  signatureCheck: string;
  raw: string;
  body: DeliveryBody | undefined;
  /** What the `onDelivery` hook threw for this delivery, if it threw (the delivery is still accepted). */
  hookError?: string;
}

/** Runs for a delivery about to be accepted; the connector answers once it has settled. */
export type DeliveryHook = (body: DeliveryBody, attempt: DeliveryAttempt) => Promise<void> | void;

export interface FakeConnector {
  /** Base URL, e.g. http://127.0.0.1:1234/deliver. */
  url: string;
  /** Accepted (200) deliveries, in arrival order. */
  deliveries: DeliveryAttempt[];
  /** Every POST, accepted or not, in arrival order. */
  attempts: DeliveryAttempt[];
  down(): void;
  up(): void;
  readonly isDown: boolean;
  /** Accepted deliveries whose body matches. */
  deliveriesFor(match: Partial<DeliveryBody>): DeliveryAttempt[];
  attemptsFor(match: Partial<DeliveryBody>): DeliveryAttempt[];
  /**
   * Sets (or, with undefined, removes) the hook run for every correctly signed delivery the
   * connector is about to accept (up, body parsed), awaited before it answers: what the hook
   * reads of the gateway, it reads while the gateway's POST is still open. A hook that throws or
   * rejects does not change the answer (200): its error is kept in `hookErrors` and on the attempt.
   * The attempt is recorded in `attempts` / `deliveries` once the hook has settled.
   */
  onDelivery(hook: DeliveryHook | undefined): void;
  /** Every error a hook threw, in order. */
  hookErrors: Array<{ attempt: DeliveryAttempt; error: unknown }>;
  close(): Promise<void>;
}

function matches(body: DeliveryBody | undefined, match: Partial<DeliveryBody>): boolean {
  if (!body) return false;
  return Object.entries(match).every(([k, v]) => body[k as keyof DeliveryBody] === v);
}

export async function startFakeConnector(secret: string): Promise<FakeConnector> {
  const deliveries: DeliveryAttempt[] = [];
  const attempts: DeliveryAttempt[] = [];
  const hookErrors: FakeConnector["hookErrors"] = [];
  let isDown = false;
  let hook: DeliveryHook | undefined;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const at = Date.now();
    const raw = await readBody(req);
    const signature = req.headers[SIGNATURE_HEADER] as string | undefined;
    const check = await verifySignature(secret, signature, raw);
    let body: DeliveryBody | undefined;
    try {
      body = JSON.parse(raw) as DeliveryBody;
    } catch {
      body = undefined;
    }
    let status: number;
    if (req.method !== "POST") status = 405;
    else if (isDown) status = 503;
    else if (!check.ok) status = 401;
    else if (!body) status = 400;
    else status = 200;
    const attempt: DeliveryAttempt = {
      at,
      path: req.url ?? "",
      status,
      signature: signature ?? null,
      signatureCheck: check.ok ? "ok" : check.reason,
      raw,
      body,
    };
    if (status === 200 && body && hook) {
      try {
        await hook(body, attempt);
      } catch (error) {
        attempt.hookError = error instanceof Error ? (error.stack ?? error.message) : String(error);
        hookErrors.push({ attempt, error });
      }
    }
    attempts.push(attempt);
    if (status === 200) deliveries.push(attempt);
    res.writeHead(status, { "content-type": "text/plain" });
    res.end(
      status === 200 ? "ok" : status === 503 ? "connector is down" : `rejected: ${attempt.signatureCheck}`,
    );
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      res.writeHead(500);
      res.end(String(error));
    });
  });
  const port = await listenOnLoopback(server);

  return {
    url: `http://127.0.0.1:${port}/deliver`,
    deliveries,
    attempts,
    down() {
      isDown = true;
    },
    up() {
      isDown = false;
    },
    get isDown() {
      return isDown;
    },
    deliveriesFor: (match) => deliveries.filter((d) => matches(d.body, match)),
    attemptsFor: (match) => attempts.filter((d) => matches(d.body, match)),
    onDelivery(next) {
      hook = next;
    },
    hookErrors,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
