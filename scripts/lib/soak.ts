/**
 * The fault-injection soak (`npm run soak`, and a short variant in test/checks/soak.test.ts, `npm run checks`):
 * N signed inbound messages over M sessions while the gateway (`wrangler dev`, 127.0.0.1) is
 * SIGKILLed at random moments and restarted on the same persistence directory, the fake
 * connector fails or hangs a share of deliveries and the fake model answers 429, 500 or slowly
 * (scripts/lib/soak-fakes.ts). A share of the messages make the model call `sessions_send`
 * (wait with a 5 s timeout, or fire-and-forget) to another soak session, or `sessions_spawn`,
 * or spawn two sub-agents and `sessions_yield` (each announcement then starts a run); a share are
 * `/steer` messages to the session the message before went to, which join its running turn when
 * there is one (SPEC §20).
 * Then the faults stop, the soak waits (bounded) for everything to settle and checks it all
 * through the operator RPC surface (`runs.get`, `deliveries.list`, `chat.history`), plus one
 * read of the local D1 `runs` table for runs no transcript names.
 *
 * The sender behaves like a real connector: an inbound webhook that fails (server down, 5xx,
 * 429) is retried with the SAME messageId, so a kill never loses a message on the sender's side;
 * the gateway dedupes by messageId. The minute cron trigger is fired every `cronEveryMs` (as the
 * platform would; `wrangler dev` does not fire it by itself).
 *
 * Definitions (the bar is 0 of each):
 * - LOST: a message the gateway never accepted (202) within the deadline; an accepted message
 *   whose run never ended, or whose text never reached its session's transcript as a user
 *   message (a steered one included); any run (D1) not ended; an inbound run that ended `ok` (or `error`,
 *   whose chat gets a notice) with no delivery row for its reply (notice); a delivery neither
 *   `delivered` nor `dead` at the end, `dead` without a cause (`lastError`), or `delivered`
 *   while the connector never accepted it; a spawned sub-agent whose announcement never reached
 *   the requester's transcript, or reached it without a delivery row to the requester's chat;
 *   a sub-agent a yielded turn waited on whose announcement started no run in the requester.
 * - DUPLICATED (what a chat would see twice): a reply accepted under two deliveryIds; a messageId
 *   answered with two different runIds, or whose text appears as a user message more than once.
 *   Delivery is at least once (SPEC §14): a POST the connector accepted just before a SIGKILL,
 *   whose outcome the gateway had not recorded yet, is made again after the restart under the
 *   same `deliveryId`, which a connector drops. No sender can make an HTTP side effect exactly
 *   once across a crash; those repeats are counted and reported on their own row. A repeat with
 *   no kill in between is a duplicate.
 * - FAILED BY THE GATEWAY: a run that ended `error` for a cause other than the injected model
 *   faults (429/500 past `models.retry`); SPEC §5 says no run can wedge a session.
 *
 * The plan (messages, sessions, kinds, targets, kill points) and the fault draws come from a
 * seeded generator, so `--seed` repeats a run's plan; timing (and so which request meets which
 * fault) still varies from run to run.
 */
import { writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature.ts";
import { executeLocalD1, type LocalServer, scratchDir, startLocalServer } from "./local-server.ts";
import { createPrng, type Prng } from "./prng.ts";
import {
  type FaultyConnector,
  type FaultyModel,
  startFaultyConnector,
  startFaultyModel,
} from "./soak-fakes.ts";

export interface SoakOptions {
  messages: number;
  sessions: number;
  kills: number;
  seed: number;
  /** Inbound requests in flight at once (default 8). */
  concurrency?: number;
  /** Global deadline: past it the soak stops, reports what it has, and fails (default 25 min). */
  deadlineMs?: number;
  /** Longest wait for everything to settle once the faults stop (default 5 min). */
  drainMs?: number;
  /** How often the minute cron trigger is fired (default 60 s). */
  cronEveryMs?: number;
  /** The bar's minimums (default: the planned counts). */
  minMessages?: number;
  minKills?: number;
  /**
   * The D1 bindings the gateway spreads its sessions over (`storage.d1`, SPEC §19), each a local
   * database of its own (default: wrangler.toml's DB alone).
   */
  d1?: readonly string[];
  /** Keep the persistence directory when the soak fails, to inspect it (default false). */
  keepStateOnFail?: boolean;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
}

export interface SoakRow {
  measure: string;
  value: string;
  bar?: string;
  pass?: boolean;
}

export interface SoakReport {
  pass: boolean;
  seed: number;
  rows: SoakRow[];
  /** Specific findings (ids, causes) behind a failing bar, for reproduction. */
  findings: string[];
  /** Where the gateway's output and the suspect transcripts were saved when the soak failed. */
  logFile?: string;
  /** The persistence directory, when kept. */
  keptState?: string;
  markdown: string;
}

const TOKEN = "soak-gateway-token";
const SECRET = "soak-connector-secret";
const ENDED = new Set(["ok", "error", "aborted", "timeout"]);

type Kind = "plain" | "send-wait" | "send-fire" | "spawn" | "yield" | "steer";

interface PlannedMessage {
  index: number;
  messageId: string;
  session: number;
  kind: Kind;
  target?: number;
}

interface SentMessage {
  acceptedRunIds: Set<string>;
  /** The 202's `status` of each answer (`steered` when it joined a running turn). */
  statuses: Set<string>;
  answers: number;
  attempts: number;
  refused?: string;
  sessionKey?: string;
}

interface RunRow {
  runId: string;
  sessionKey: string;
  trigger: string;
  status: string;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
}

interface DeliveryRow {
  deliveryId: string;
  kind: string;
  sessionKey: string;
  runId?: string;
  status: string;
  attempts: number;
  lastError?: string;
  createdAt?: number;
  updatedAt?: number;
  nextAttemptAt?: number;
}

interface HistoryMessage {
  id: string;
  role: string;
  runId?: string;
  isError?: boolean;
  toolName?: string;
  content: Array<{ type: string; text?: string }>;
  provenance?: { kind: string; sourceSessionKey?: string };
}

/** A sub-agent's announcement in its requester's transcript (`runId`: the run it started). */
interface Announcement {
  requester: string;
  id: string;
  runId?: string;
}

/**
 * The delivery that posts a sub-agent's announcement to its requester's chat. Its id is
 * `<announce-step run>:announcement:announce`, also when it started a run in the requester.
 */
function announcementDeliveryId(a: Announcement, announceRun: string | undefined): string {
  return `${announceRun ? `${announceRun}:announcement` : a.id}:announce`;
}

/** A turn that ended in `sessions_yield`, and the sub-agents it waited on. */
interface Yield {
  requester: string;
  runId?: string;
  waitingOn: string[];
}

interface Kill {
  /** When the SIGKILL was sent, when the last process of the group was gone, when it was back up. */
  at: number;
  goneAt?: number;
  upAt?: number;
}

interface HistoryPage {
  messages: HistoryMessage[];
  hasMore: boolean;
  nextBefore?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function sessionKeyOf(session: number): string {
  return session % 3 === 2
    ? `agent:main:telegram:group:soak-group-${session}`
    : `agent:main:telegram:dm:soak-peer-${session}`;
}

function plan(opts: SoakOptions, prng: Prng): { messages: PlannedMessage[]; killPoints: number[] } {
  const r = prng.fork("plan");
  const messages: PlannedMessage[] = [];
  for (let i = 0; i < opts.messages; i++) {
    // The first message of every session is plain, so that every send target exists.
    if (i < opts.sessions) {
      messages.push({ index: i, messageId: `soak-${opts.seed}-${i}`, session: i, kind: "plain" });
      continue;
    }
    const roll = r.next();
    const kind: Kind =
      roll < 0.08
        ? "send-wait"
        : roll < 0.15
          ? "send-fire"
          : roll < 0.21
            ? "spawn"
            : roll < 0.25
              ? "yield"
              : roll < 0.35
                ? "steer"
                : "plain";
    // A steer goes where the message before it went, whose turn may still run.
    const drawn = r.int(0, opts.sessions - 1);
    const session = kind === "steer" ? (messages[i - 1]?.session ?? drawn) : drawn;
    const m: PlannedMessage = { index: i, messageId: `soak-${opts.seed}-${i}`, session, kind };
    if (kind === "send-wait" || kind === "send-fire") {
      let target = r.int(0, opts.sessions - 2);
      if (target >= session) target++;
      m.target = target;
    }
    messages.push(m);
  }
  const k = prng.fork("kills");
  const first = Math.min(opts.sessions, opts.messages);
  const killPoints = Array.from({ length: opts.kills }, () =>
    k.int(first, Math.max(first, opts.messages - 1)),
  ).sort((a, b) => a - b);
  return { messages, killPoints };
}

function inboundBody(m: PlannedMessage, sessions: number): string {
  const group = m.session % 3 === 2;
  const directive =
    m.kind === "plain" || m.kind === "steer"
      ? ""
      : ` #soak ${m.kind}${m.target !== undefined ? ` ${sessionKeyOf(m.target)}` : ""}`;
  const from = group ? `soak-member-${m.index % 7}` : `soak-peer-${m.session}`;
  return JSON.stringify({
    messageId: m.messageId,
    chatType: group ? "group" : "direct",
    from,
    to: "soak-bot",
    ...(group ? { groupId: `soak-group-${m.session}`, groupSubject: `Soak group ${m.session}` } : {}),
    text: `${m.kind === "steer" ? "/steer " : ""}[m${m.index}] soak message ${m.index} of session ${m.session}/${sessions}${directive}`,
    senderName: `Soak ${from}`,
  });
}

function gatewayConfig(
  connector: FaultyConnector,
  model: FaultyModel,
  d1: readonly string[] | undefined,
): Record<string, unknown> {
  return {
    ...(d1 ? { storage: { d1 } } : {}),
    session: {
      dmScope: "per-channel-peer",
      // Idle-only with a long window: no daily reset in the middle of a soak.
      reset: { mode: "idle", idleMinutes: 100_000 },
      queue: { mode: "followup", cap: 200 },
      agentToAgent: { maxPingPongTurns: 2, maxHops: 12 },
    },
    agents: { defaults: { model: "soak/soak-model" }, list: [{ id: "main", default: true }] },
    models: {
      providers: { soak: { api: "openai-compatible", baseUrl: model.baseUrl } },
      retry: { attempts: 3, baseDelayMs: 50 },
    },
    tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    // The bridge opts in to streamed replies (SPEC §22): previews come before the reply.
    connectors: {
      telegram: { deliverUrl: connector.url, secretEnv: "CONNECTOR_SECRET", streaming: { mode: "partial" } },
    },
    delivery: { maxAttempts: 4, baseDelayMs: 200, maxDelayMs: 2000 },
  };
}

export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const started = performance.now();
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const say = (msg: string) => log(`[soak +${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}`);
  const concurrency = opts.concurrency ?? 8;
  const deadline = Date.now() + (opts.deadlineMs ?? 25 * 60_000);
  const drainMs = opts.drainMs ?? 5 * 60_000;
  const cronEveryMs = opts.cronEveryMs ?? 60_000;
  const prng = createPrng(opts.seed);
  const { messages, killPoints } = plan(opts, prng);
  const findings: string[] = [];
  const problems: string[] = [];
  const outputs: string[] = [];
  const diagnostics: string[] = [];

  const connector = await startFaultyConnector(SECRET, prng.fork("connector"), {
    failShare: 0.25,
    hangShare: 0.005,
    hangMs: 16_000,
  });
  const model = await startFaultyModel(prng.fork("model"), {
    rate429: 0.06,
    rate500: 0.06,
    slowShare: 0.1,
    slowMs: [200, 800],
  });
  const persistTo = scratchDir("switchboard-soak-");
  const config = gatewayConfig(connector, model, opts.d1);
  let server: LocalServer | undefined;
  const kills: Kill[] = [];
  let killsSurvived = 0;
  let cronFired = 0;
  let inboundRetries = 0;
  let timedOut = false;

  const start = async (first: boolean) => {
    server = await startLocalServer({
      persistTo,
      config,
      vars: { GATEWAY_TOKEN: TOKEN, CONNECTOR_SECRET: SECRET },
      migrate: first,
      ...(opts.d1 ? { d1: opts.d1 } : {}),
    });
  };

  const rpc = async <T>(method: string, params: unknown): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      const s = server;
      try {
        if (!s) throw new Error("gateway is down");
        const res = await fetch(`${s.url}/rpc/${method}`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(params),
          signal: AbortSignal.timeout(30_000),
        });
        const body = (await res.json()) as {
          ok: boolean;
          payload?: T;
          error?: { code: string; message: string };
        };
        if (body.ok && body.payload !== undefined) return body.payload;
        const error = new Error(`${method} → ${res.status} ${body.error?.code}: ${body.error?.message}`);
        if (res.status < 500) throw Object.assign(error, { final: true });
        throw error;
      } catch (error) {
        if ((error as { final?: boolean }).final || attempt >= 20 || Date.now() > deadline + 60_000) {
          throw error;
        }
        await sleep(Math.min(200 * 2 ** attempt, 2_000));
      }
    }
  };

  // ---------------------------------------------------------------------------------------------
  // Sending

  const sent = new Map<string, SentMessage>();
  let sentCount = 0;

  const send = async (m: PlannedMessage): Promise<void> => {
    const raw = inboundBody(m, opts.sessions);
    const record: SentMessage = { acceptedRunIds: new Set(), statuses: new Set(), answers: 0, attempts: 0 };
    sent.set(m.messageId, record);
    sentCount++;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      record.attempts++;
      if (attempt > 0) inboundRetries++;
      const s = server;
      try {
        if (!s) throw new Error("gateway is down");
        const res = await fetch(`${s.url}/hooks/inbound/telegram`, {
          method: "POST",
          headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(SECRET, raw) },
          body: raw,
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        if (res.status === 202) {
          const body = JSON.parse(text) as { runId?: string; sessionKey?: string; status?: string };
          record.answers++;
          if (body.runId) record.acceptedRunIds.add(body.runId);
          if (body.status) record.statuses.add(body.status);
          record.sessionKey = body.sessionKey;
          if (body.sessionKey !== sessionKeyOf(m.session)) {
            problems.push(`${m.messageId} went to ${body.sessionKey}, expected ${sessionKeyOf(m.session)}`);
          }
          return;
        }
        if (res.status < 500 && res.status !== 429) {
          record.refused = `${res.status} ${text.slice(0, 200)}`;
          return;
        }
      } catch {
        // down, killed mid-request, or timed out: retried with the same messageId
      }
      await sleep(Math.min(100 * 2 ** Math.min(attempt, 5), 2_000));
    }
  };

  const sendAll = async (batch: PlannedMessage[]) => {
    let next = 0;
    const worker = async () => {
      while (next < batch.length && Date.now() < deadline) {
        const m = batch[next++];
        if (m) await send(m);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, batch.length) }, worker));
  };

  // ---------------------------------------------------------------------------------------------
  // Faults: kills at planned points of the send phase, each after a random delay.

  let sendingDone = false;
  const killer = async () => {
    const r = prng.fork("kill-delays");
    for (const point of killPoints) {
      while (sentCount < point && !sendingDone && Date.now() < deadline) await sleep(20);
      if (Date.now() >= deadline) return;
      await sleep(r.int(0, 1500));
      const s = server;
      if (!s) continue;
      server = undefined;
      const kill: Kill = { at: Date.now() };
      kills.push(kill);
      await s.stop("SIGKILL");
      kill.goneAt = Date.now();
      outputs.push(s.output());
      say(
        `kill ${kills.length}/${killPoints.length} (pid ${s.pid}) after ${sentCount} messages sent; restarting`,
      );
      try {
        await start(false);
      } catch (error) {
        say(
          `restart failed, trying once more: ${error instanceof Error ? error.message.split("\n")[0] : error}`,
        );
        await start(false);
      }
      kill.upAt = Date.now();
      killsSurvived++;
    }
  };

  const cronTimer = setInterval(() => {
    const s = server;
    if (!s) return;
    // A kill may cut the answer's body short as well as the request: neither is an error here.
    fetch(`${s.url}/__scheduled?cron=*+*+*+*+*`, { signal: AbortSignal.timeout(30_000) })
      .then((res) => {
        cronFired++;
        return res.text();
      })
      .catch(() => undefined);
  }, cronEveryMs);

  let report: SoakReport | undefined;
  try {
    await start(true);
    say(
      `gateway on ${server?.url}; connector ${connector.url}; model ${model.baseUrl}; persistence ${persistTo}`,
    );
    say(
      `plan: ${opts.messages} messages over ${opts.sessions} sessions, ${opts.kills} kills, seed ${opts.seed}`,
    );
    const first = Math.min(opts.sessions, messages.length);
    await sendAll(messages.slice(0, first));
    const killing = killer();
    const progress = setInterval(
      () => say(`${sentCount}/${messages.length} sent, ${kills.length} kills`),
      15_000,
    );
    try {
      await sendAll(messages.slice(first));
    } finally {
      sendingDone = true;
      clearInterval(progress);
    }
    await killing;
    say(`sending done: ${sentCount} sent, ${kills.length} kills; faults off, draining`);
    connector.faults = false;
    model.faults = false;

    // ---------------------------------------------------------------------------------------------
    // Drain and account

    const runs = new Map<string, RunRow>();
    const runIdsToCheck = new Set<string>();
    for (const s of sent.values()) for (const id of s.acceptedRunIds) runIdsToCheck.add(id);
    /** Run ids only a transcript message names (e.g. a compaction's memory flush turn). */
    const transcriptOnly = new Set<string>();
    /** Of those, the ones runs.get does not know: message ids, not runs; reported, not checked. */
    const notRuns = new Map<string, string>();
    const sessionsToScan = new Set(Array.from({ length: opts.sessions }, (_, i) => sessionKeyOf(i)));
    const sends: Array<{ requester: string; runId: string; status: string }> = [];
    const spawns: Array<{ requester: string; runId: string; childSessionKey: string }> = [];
    const announcements = new Map<string, Announcement>();
    /** A child session's announce-step run, whose id names the announcement and its delivery. */
    const announceRuns = new Map<string, string>();
    const yields: Yield[] = [];
    const userTexts = new Map<string, number>();

    const refreshRuns = async () => {
      const open = [...runIdsToCheck].filter(
        (id) => !notRuns.has(id) && !ENDED.has(runs.get(id)?.status ?? ""),
      );
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < open.length) {
            const id = open[next++];
            if (!id) continue;
            try {
              runs.set(id, await rpc<RunRow>("runs.get", { runId: id }));
            } catch (error) {
              const message = error instanceof Error ? error.message : String(error);
              if (transcriptOnly.has(id) && message.includes("NOT_FOUND")) notRuns.set(id, message);
              else runs.set(id, { runId: id, sessionKey: "?", trigger: "?", status: `unknown (${message})` });
            }
          }
        }),
      );
      return open.filter((id) => !notRuns.has(id) && !ENDED.has(runs.get(id)?.status ?? "")).length;
    };

    const scanTranscripts = async () => {
      sends.length = 0;
      spawns.length = 0;
      announcements.clear();
      announceRuns.clear();
      yields.length = 0;
      userTexts.clear();
      const scanned = new Set<string>();
      while (true) {
        const key = [...sessionsToScan].find((k) => !scanned.has(k));
        if (!key) break;
        scanned.add(key);
        let before: number | undefined;
        for (let page = 0; page < 100; page++) {
          const h = await rpc<HistoryPage>("chat.history", {
            sessionKey: key,
            limit: 1000,
            includeTools: true,
            ...(before ? { before } : {}),
          }).catch((error: unknown) => {
            problems.push(`chat.history ${key}: ${error instanceof Error ? error.message : error}`);
            return { messages: [], hasMore: false } as HistoryPage;
          });
          for (const msg of h.messages) {
            if (msg.runId && !runIdsToCheck.has(msg.runId)) {
              runIdsToCheck.add(msg.runId);
              transcriptOnly.add(msg.runId);
            }
            const text = msg.content.map((p) => p.text ?? "").join("");
            if (
              msg.role === "toolResult" &&
              (msg.toolName === "sessions_send" || msg.toolName === "sessions_spawn")
            ) {
              let result: { runId?: string; status?: string; childSessionKey?: string } = {};
              try {
                result = JSON.parse(text) as typeof result;
              } catch {
                // an error text
              }
              if (msg.toolName === "sessions_send" && result.runId) {
                sends.push({ requester: key, runId: result.runId, status: result.status ?? "?" });
                runIdsToCheck.add(result.runId);
                transcriptOnly.delete(result.runId);
              }
              if (msg.toolName === "sessions_spawn" && result.runId && result.childSessionKey) {
                spawns.push({ requester: key, runId: result.runId, childSessionKey: result.childSessionKey });
                runIdsToCheck.add(result.runId);
                transcriptOnly.delete(result.runId);
                sessionsToScan.add(result.childSessionKey);
              }
            }
            if (msg.role === "toolResult" && msg.toolName === "sessions_yield" && !msg.isError) {
              try {
                const result = JSON.parse(text) as { status?: string; waitingOn?: string[] };
                if (result.status === "yielded")
                  yields.push({ requester: key, runId: msg.runId, waitingOn: result.waitingOn ?? [] });
              } catch {
                // not a result the tool wrote
              }
            }
            if (msg.role === "user" && msg.runId && text.startsWith("[sub-agent announce]")) {
              announceRuns.set(key, msg.runId);
            }
            if (
              msg.role === "user" &&
              msg.provenance?.kind === "subagent_announce" &&
              msg.provenance.sourceSessionKey
            ) {
              announcements.set(msg.provenance.sourceSessionKey, {
                requester: key,
                id: msg.id,
                ...(msg.runId ? { runId: msg.runId } : {}),
              });
            }
            if (msg.role === "user" && msg.provenance?.kind === "external_user") {
              const tag = /\[m(\d+)\]/.exec(text)?.[1];
              if (tag) userTexts.set(tag, (userTexts.get(tag) ?? 0) + 1);
            }
          }
          if (!h.hasMore || !h.nextBefore) break;
          before = h.nextBefore;
        }
      }
    };

    const unsettledDeliveries = async () => {
      const [pending, retrying] = await Promise.all([
        rpc<{ deliveries: DeliveryRow[] }>("deliveries.list", { status: "pending", limit: 1 }),
        rpc<{ deliveries: DeliveryRow[] }>("deliveries.list", { status: "retrying", limit: 1 }),
      ]);
      return pending.deliveries.length + retrying.deliveries.length;
    };

    /** Announcements whose delivery D1 does not show (each requester's actor records first). */
    const announcementsWithoutDelivery = async () => {
      const wanted = new Map<string, Set<string>>();
      for (const [child, a] of announcements) {
        const ids = wanted.get(a.requester) ?? new Set<string>();
        wanted.set(a.requester, ids.add(announcementDeliveryId(a, announceRuns.get(child))));
      }
      let missing = 0;
      for (const [sessionKey, ids] of wanted) {
        const seen = new Set<string>();
        let after: string | undefined;
        for (let page = 0; page < 100; page++) {
          const p = await rpc<{ deliveries: DeliveryRow[]; nextCursor?: string }>("deliveries.list", {
            sessionKey,
            limit: 200,
            ...(after ? { cursor: after } : {}),
          });
          for (const d of p.deliveries) seen.add(d.deliveryId);
          if (!p.nextCursor) break;
          after = p.nextCursor;
        }
        for (const id of ids) if (!seen.has(id)) missing++;
      }
      return missing;
    };

    const drainDeadline = Math.min(deadline, Date.now() + drainMs);
    let settled = false;
    let lastState = "";
    while (Date.now() < drainDeadline) {
      const openRuns = await refreshRuns();
      const openDeliveries = await unsettledDeliveries();
      if (openRuns === 0 && openDeliveries === 0) {
        const known = runIdsToCheck.size;
        await scanTranscripts();
        const missingAnnouncements = spawns.filter((s) => !announcements.has(s.childSessionKey)).length;
        // An announcement is handed to its requester's outbox after the sub-agent's run ended,
        // and D1 shows its delivery only once an attempt's outcome is recorded: wait for that.
        const unposted = await announcementsWithoutDelivery();
        if (
          runIdsToCheck.size === known &&
          missingAnnouncements === 0 &&
          unposted === 0 &&
          (await refreshRuns()) === 0
        ) {
          settled = true;
          break;
        }
        lastState = `${runIdsToCheck.size - known} new runs found, ${missingAnnouncements} announcements missing, ${unposted} announcements without a delivery row`;
      } else {
        lastState = `${openRuns} runs not ended, ${openDeliveries} deliveries pending/retrying`;
      }
      say(`draining: ${lastState}`);
      await sleep(2_000);
    }
    if (!settled) {
      timedOut = Date.now() >= deadline;
      say(`not settled within the drain window: ${lastState}`);
      await scanTranscripts();
      await refreshRuns();
    }

    // A delivered reply's outcome reaches D1 with its session's next write, or a minute later
    // (session/d1/records.ts); a read of one session's deliveries has its actor write them first.
    const sessionKeys = new Set([...runs.values()].map((r) => r.sessionKey));
    for (const s of spawns) sessionKeys.add(s.childSessionKey);
    for (const sessionKey of sessionKeys) {
      if (Date.now() >= deadline) break;
      await rpc("deliveries.list", { sessionKey, limit: 1 }).catch(() => undefined);
    }

    // All deliveries, paged.
    const deliveries = new Map<string, DeliveryRow>();
    let cursor: string | undefined;
    for (let page = 0; page < 10_000; page++) {
      const p = await rpc<{ deliveries: DeliveryRow[]; nextCursor?: string }>("deliveries.list", {
        limit: 200,
        ...(cursor ? { cursor } : {}),
      });
      for (const d of p.deliveries) deliveries.set(d.deliveryId, d);
      if (!p.nextCursor) break;
      cursor = p.nextCursor;
    }

    // For a failing soak: the transcripts and delivery rows of the sessions where something went
    // wrong, read while the gateway still runs.
    const suspects = new Set<string>();
    for (const r of runs.values())
      if (!ENDED.has(r.status) || r.status === "error") suspects.add(r.sessionKey);
    for (const d of deliveries.values()) if (d.status !== "delivered") suspects.add(d.sessionKey);
    for (const [child, a] of announcements)
      if (!deliveries.has(announcementDeliveryId(a, announceRuns.get(child)))) suspects.add(a.requester);
    for (const sp of spawns) if (!announcements.has(sp.childSessionKey)) suspects.add(sp.requester);
    for (const s of sent.values())
      for (const id of s.acceptedRunIds) {
        const r = runs.get(id);
        if (r?.status === "ok" && r.reply && !deliveries.has(`${id}:reply`)) suspects.add(r.sessionKey);
      }
    for (const key of [...suspects].slice(0, 20)) {
      if (key === "?") continue;
      const h = await rpc<HistoryPage>("chat.history", {
        sessionKey: key,
        limit: 1000,
        includeTools: true,
      }).catch((error: unknown) => String(error));
      const own = [...deliveries.values()].filter((d) => d.sessionKey === key);
      const undelivered = own.filter((d) => d.status !== "delivered");
      diagnostics.push(
        `===== ${key}: undelivered ${JSON.stringify(undelivered)}`,
        `===== deliveries of ${key}: ${own.map((d) => `${d.deliveryId} ${d.status}`).join(", ")}`,
        JSON.stringify(h, null, 1),
        `===== runs of ${key}: ${JSON.stringify([...runs.values()].filter((r) => r.sessionKey === key))}`,
      );
    }

    clearInterval(cronTimer);
    const last = server;
    server = undefined;
    if (last) {
      await last.stop();
      outputs.push(last.output());
    }

    // Every run the gateway recorded, whether or not a transcript names it.
    const d1Open = await openRunsInD1(persistTo, opts.d1 ?? ["DB"]).catch((error: unknown) => {
      problems.push(`reading the runs table failed: ${error instanceof Error ? error.message : error}`);
      return { total: Number.NaN, open: [] as Array<{ runId: string; status: string; trigger: string }> };
    });

    report = account({
      opts,
      messages,
      sent,
      runs,
      runIds: new Set([...runIdsToCheck].filter((id) => !notRuns.has(id))),
      notRuns,
      deliveries,
      connector,
      model,
      sends,
      spawns,
      announcements,
      announceRuns,
      yields,
      userTexts,
      d1: d1Open,
      kills,
      killsSurvived,
      cronFired,
      inboundRetries,
      timedOut: timedOut || Date.now() >= deadline,
      settled,
      findings,
      problems,
      wallMs: performance.now() - started,
    });
  } finally {
    clearInterval(cronTimer);
    const s = server;
    server = undefined;
    if (s) {
      await s.stop("SIGKILL").catch(() => undefined);
      outputs.push(s.output());
    }
    await Promise.all([connector.close(), model.close()]);
    if (!(opts.keepStateOnFail && report && !report.pass))
      await rm(persistTo, { recursive: true, force: true });
  }
  if (!report) throw new Error("the soak ended without a report");
  if (!report.pass) {
    const file = path.join(tmpdir(), `switchboard-soak-${opts.seed}-${Date.now()}.log`);
    writeFileSync(
      file,
      [...outputs.map((o, i) => `===== gateway incarnation ${i + 1} =====\n${o}`), ...diagnostics].join("\n"),
    );
    report.logFile = file;
    report.markdown += `\nGateway output of every incarnation and the suspect sessions' transcripts: ${file}\n`;
    if (opts.keepStateOnFail) {
      report.keptState = persistTo;
      report.markdown += `Persistence directory kept: ${persistTo}\n`;
    }
  }
  return report;
}

/** Every run in D1 (all databases of `d1`) and those not ended, read once the gateway is down. */
async function openRunsInD1(
  persistTo: string,
  d1: readonly string[],
): Promise<{ total: number; open: Array<{ runId: string; status: string; trigger: string }> }> {
  let total = 0;
  const open: Array<{ runId: string; status: string; trigger: string }> = [];
  for (const binding of d1) {
    const [counts, rows] = (await executeLocalD1(
      persistTo,
      binding,
      "SELECT COUNT(*) AS total FROM runs; SELECT run_id AS runId, status, \"trigger\" FROM runs WHERE status NOT IN ('ok', 'error', 'aborted', 'timeout')",
      d1,
    )) as [Array<{ total: number }>, Array<{ runId: string; status: string; trigger: string }>];
    total += counts?.[0]?.total ?? Number.NaN;
    open.push(...(rows ?? []));
  }
  return { total, open };
}

// ---------------------------------------------------------------------------------------------
// Accounting and the table

interface AccountInput {
  opts: SoakOptions;
  messages: PlannedMessage[];
  sent: Map<string, SentMessage>;
  runs: Map<string, RunRow>;
  runIds: Set<string>;
  notRuns: Map<string, string>;
  deliveries: Map<string, DeliveryRow>;
  connector: FaultyConnector;
  model: FaultyModel;
  sends: Array<{ requester: string; runId: string; status: string }>;
  spawns: Array<{ requester: string; runId: string; childSessionKey: string }>;
  announcements: Map<string, Announcement>;
  announceRuns: Map<string, string>;
  yields: Yield[];
  userTexts: Map<string, number>;
  d1: { total: number; open: Array<{ runId: string; status: string; trigger: string }> };
  kills: Kill[];
  killsSurvived: number;
  cronFired: number;
  inboundRetries: number;
  timedOut: boolean;
  settled: boolean;
  findings: string[];
  problems: string[];
  wallMs: number;
}

function count<T>(items: Iterable<T>, key: (item: T) => string): Map<string, number> {
  const out = new Map<string, number>();
  for (const item of items) out.set(key(item), (out.get(key(item)) ?? 0) + 1);
  return out;
}

function summarize(counts: Map<string, number>): string {
  if (counts.size === 0) return "none";
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ");
}

/** A delivery's cause without the ids and numbers that make every line unique. */
function causeOf(error: string | undefined): string {
  if (!error) return "(no cause)";
  return error.replace(/\s+/g, " ").slice(0, 80);
}

function account(x: AccountInput): SoakReport {
  const { findings } = x;
  const lost: string[] = [];
  const duplicated: string[] = [];
  /** Accepted deliveryIds POSTed again (at least once; a connector drops them by deliveryId). */
  const repeated: string[] = [];
  const fmt = (n: number) => n.toLocaleString("en-US");

  // Messages
  const accepted = [...x.sent.entries()].filter(([, s]) => s.acceptedRunIds.size > 0);
  const notAccepted = x.messages.filter((m) => (x.sent.get(m.messageId)?.acceptedRunIds.size ?? 0) === 0);
  for (const m of notAccepted) {
    const s = x.sent.get(m.messageId);
    lost.push(
      `${m.messageId} never accepted (${s ? (s.refused ?? `${s.attempts} attempts`) : "never sent"})`,
    );
  }
  for (const [id, s] of accepted) {
    if (s.acceptedRunIds.size > 1)
      duplicated.push(`${id} answered with runIds ${[...s.acceptedRunIds].join(", ")}`);
  }
  for (const [tag, n] of x.userTexts) {
    if (n > 1) duplicated.push(`message [m${tag}] appears ${n} times as a user message in its transcript`);
  }
  for (const m of x.messages) {
    if ((x.sent.get(m.messageId)?.acceptedRunIds.size ?? 0) > 0 && !x.userTexts.has(String(m.index)))
      lost.push(`${m.messageId} ([m${m.index}], ${m.kind}) was accepted but is in no transcript`);
  }

  // Runs
  for (const [id, why] of x.notRuns) {
    x.problems.push(`transcript messages name run ${id}, which runs.get does not know (${why})`);
  }
  const allRuns = [...x.runIds].map((id) => x.runs.get(id)).filter((r): r is RunRow => !!r);
  const started = allRuns.filter((r) => r.startedAt !== undefined).length;
  const byStatus = count(allRuns, (r) => (ENDED.has(r.status) ? r.status : "not ended"));
  const byTrigger = count(allRuns, (r) => r.trigger);
  const notEnded = allRuns.filter((r) => !ENDED.has(r.status));
  const inboundRunIds = new Set(accepted.flatMap(([, s]) => [...s.acceptedRunIds]));
  for (const r of notEnded) {
    const what = inboundRunIds.has(r.runId) ? "accepted message's run" : `${r.trigger} run`;
    lost.push(`${what} ${r.runId} (${r.sessionKey}) is ${r.status}`);
  }
  for (const r of x.d1.open) {
    if (!notEnded.some((n) => n.runId === r.runId)) {
      lost.push(`${r.trigger} run ${r.runId} is ${r.status} in D1 (named by no transcript)`);
    }
  }
  // A run may fail because the model kept answering the injected 429/500 past the retries;
  // any other cause is the gateway's own failure (SPEC §5: no run can wedge a session).
  const injected = (r: RunRow) => /soak fault (429|500)/.test(r.error ?? "");
  const ownFailures = allRuns.filter((r) => r.status === "error" && !injected(r));
  for (const r of [...ownFailures, ...allRuns.filter((r) => r.status === "error" && injected(r))].slice(
    0,
    30,
  )) {
    findings.push(`error run: ${r.trigger} run ${r.runId} in ${r.sessionKey}: ${r.error ?? "(no cause)"}`);
  }
  const runErrors = count(
    allRuns.filter((r) => r.status === "error"),
    (r) => causeOf(r.error),
  );

  // Replies of inbound runs
  for (const id of inboundRunIds) {
    const r = x.runs.get(id);
    if (!r) continue;
    const expected =
      r.status === "ok" && r.reply ? `${id}:reply` : r.status === "error" ? `${id}:notice` : undefined;
    if (expected && !x.deliveries.has(expected)) {
      lost.push(
        `run ${id} (${r.sessionKey}) ended ${r.status} (reply ${JSON.stringify(r.reply?.slice(0, 60))}) but has no delivery ${expected}`,
      );
    }
  }

  // Deliveries
  /** ", last updated N ms before kill K" when a kill followed within 2 s. */
  const afterKill = (at: number | undefined) => {
    if (at === undefined) return "";
    const k = x.kills.findIndex((kill) => kill.at >= at && kill.at - at < 2_000);
    const kill = x.kills[k];
    return kill ? `; last updated ${kill.at - at} ms before kill ${k + 1}` : "";
  };
  const deliveries = [...x.deliveries.values()];
  const byDeliveryStatus = count(deliveries, (d) => d.status);
  const dead = deliveries.filter((d) => d.status === "dead");
  for (const d of deliveries) {
    if (d.status !== "delivered" && d.status !== "dead") {
      lost.push(
        `delivery ${d.deliveryId} (${d.kind}, ${d.sessionKey}) is ${d.status} after ${d.attempts} attempts (created ${
          d.createdAt ? new Date(d.createdAt).toISOString() : "?"
        }, next attempt ${d.nextAttemptAt ? new Date(d.nextAttemptAt).toISOString() : "none"}; the connector accepted it ${
          x.connector.accepted.get(d.deliveryId)?.length ?? 0
        } times${afterKill(d.updatedAt)})`,
      );
    }
    if (d.status === "dead" && !d.lastError) lost.push(`delivery ${d.deliveryId} is dead without a cause`);
    if (d.status === "delivered" && !x.connector.accepted.has(d.deliveryId)) {
      lost.push(`delivery ${d.deliveryId} (${d.kind}) is delivered but the connector never accepted it`);
    }
  }
  for (const [id, list] of x.connector.accepted) {
    if (!x.deliveries.has(id))
      x.problems.push(`the connector accepted ${id}, which deliveries.list does not show`);
    if (list.length > 1) {
      const first = list[0]?.at ?? 0;
      const second = list[1]?.at ?? 0;
      // The kill fell between the two if the first came before the gateway was gone (a POST can
      // be accepted while the SIGKILL is on its way) and the second after it was sent.
      const k = x.kills.findIndex((kill) => first <= (kill.goneAt ?? kill.at) && second >= kill.at);
      const kill = x.kills[k];
      // Without a kill in between, a repeat is a gateway bug, not at-least-once delivery.
      (kill ? repeated : duplicated).push(
        `deliveryId ${id} (${list[0]?.kind}, ${list[0]?.sessionKey}) accepted ${list.length} times, ${
          second - first
        } ms apart${
          kill
            ? first <= kill.at
              ? `; first accepted ${kill.at - first} ms before kill ${k + 1}`
              : `; first accepted while kill ${k + 1} was under way`
            : "; no kill in between"
        }`,
      );
    }
  }
  // A message answered by two runs (two deliveryIds) is a duplicate no connector can drop. Only
  // the replies of message runs count: a turn that yielded answers its message again from the
  // runs its sub-agents' announcements start.
  const repliesByMessage = new Map<string, Set<string>>();
  for (const [id, list] of x.connector.accepted) {
    const to = list[0]?.replyToMessageId;
    if (list[0]?.kind !== "reply" || !to) continue;
    if (x.runs.get(id.replace(/:reply$/, ""))?.trigger !== "inbound") continue;
    repliesByMessage.set(to, (repliesByMessage.get(to) ?? new Set()).add(id));
  }
  for (const [messageId, ids] of repliesByMessage) {
    if (ids.size > 1)
      duplicated.push(
        `message ${messageId} was answered under ${ids.size} deliveryIds: ${[...ids].join(", ")}`,
      );
  }
  const repliesDelivered = deliveries.filter((d) => d.kind === "reply" && d.status === "delivered").length;
  // Streamed replies: a preview is POSTed while the model writes, never after its reply was
  // accepted (a preview the connector took after the reply would show stale text).
  let previewCount = 0;
  let streamedReplies = 0;
  let previewsAfterReply = 0;
  for (const [deliveryId, times] of x.connector.previews) {
    previewCount += times.length;
    const reply = x.connector.accepted.get(deliveryId)?.[0];
    if (!reply) continue;
    streamedReplies++;
    const late = times.filter((t) => t > reply.at).length;
    if (late) {
      previewsAfterReply += late;
      findings.push(`${late} preview(s) of ${deliveryId} were accepted after its reply`);
    }
  }
  const deliveredByKind = count(
    deliveries.filter((d) => d.status === "delivered"),
    (d) => d.kind,
  );

  // Sub-agents and sends
  let announcementsLost = 0;
  for (const s of x.spawns) {
    const a = x.announcements.get(s.childSessionKey);
    if (!a) {
      announcementsLost++;
      const child = x.runs.get(s.runId);
      lost.push(
        `announcement of ${s.childSessionKey} (task run ${s.runId}, ${child?.status ?? "?"}) never reached ${s.requester}`,
      );
    } else {
      const deliveryId = announcementDeliveryId(a, x.announceRuns.get(s.childSessionKey));
      if (!x.deliveries.has(deliveryId)) {
        announcementsLost++;
        lost.push(`announcement ${a.id} in ${a.requester} has no delivery row ${deliveryId}`);
      }
    }
  }
  // Yields: each sub-agent a yielded turn waited on starts a run with its announcement.
  let yieldRuns = 0;
  for (const y of x.yields) {
    for (const child of y.waitingOn) {
      const a = x.announcements.get(child);
      if (a?.runId) yieldRuns++;
      else if (a)
        lost.push(`${y.requester}'s turn ${y.runId} yielded to ${child}, whose announcement started no run`);
    }
  }
  const yieldsRequested = x.messages.filter((m) => m.kind === "yield").length;
  const steersSent = x.messages.filter((m) => m.kind === "steer" && x.sent.has(m.messageId));
  const steered = steersSent.filter((m) => x.sent.get(m.messageId)?.statuses.has("steered")).length;
  const spawnsRequested = x.messages.filter((m) => m.kind === "spawn").length;
  const sendsRequested = x.messages.filter((m) => m.kind === "send-wait" || m.kind === "send-fire").length;
  const sendsOk = x.sends.filter((s) => x.runs.get(s.runId)?.status === "ok").length;
  const sendAnswers = count(x.sends, (s) => s.status);

  for (const line of [...lost.map((l) => `lost: ${l}`), ...duplicated.map((d) => `duplicated: ${d}`)]) {
    findings.push(line);
  }
  for (const p of x.problems) findings.push(`problem: ${p}`);

  const minMessages = x.opts.minMessages ?? x.opts.messages;
  const minKills = x.opts.minKills ?? x.opts.kills;
  const rows: SoakRow[] = [
    {
      measure: "messages sent (signed inbound, distinct messageIds)",
      value: `${fmt(x.sent.size)} of ${fmt(x.messages.length)} planned; ${fmt(x.inboundRetries)} retries with the same messageId`,
    },
    {
      measure: "messages accepted (202)",
      value: fmt(accepted.length),
      bar: `≥ ${fmt(minMessages)}`,
      pass: accepted.length >= minMessages,
    },
    { measure: "runs started", value: `${fmt(started)} (by trigger: ${summarize(byTrigger)})` },
    {
      measure: "runs ended by status",
      value: `${summarize(byStatus)}; errors: ${summarize(runErrors)}; runs in D1: ${fmt(x.d1.total)}${x.opts.d1 && x.opts.d1.length > 1 ? ` (over ${x.opts.d1.length} databases)` : ""}`,
      bar: "every run ended",
      pass: notEnded.length === 0 && x.d1.open.length === 0 && allRuns.length > 0,
    },
    {
      measure: "runs failed by a cause the soak did not inject",
      value: `${fmt(ownFailures.length)}${
        ownFailures.length
          ? ` in ${new Set(ownFailures.map((r) => r.sessionKey)).size} sessions (${summarize(count(ownFailures, (r) => causeOf(r.error)))})`
          : ""
      }`,
      bar: "0 (every failed run met injected model faults)",
      pass: ownFailures.length === 0,
    },
    {
      measure: "replies delivered",
      value: `${fmt(repliesDelivered)} (all delivered: ${summarize(deliveredByKind)})`,
    },
    {
      measure: "deliveries by status",
      value: summarize(byDeliveryStatus),
      bar: "every delivery delivered, or dead with a cause",
      pass:
        deliveries.every((d) => d.status === "delivered" || (d.status === "dead" && !!d.lastError)) &&
        deliveries.length > 0,
    },
    {
      measure: "duplicates (a chat would see a message twice)",
      value: fmt(duplicated.length),
      bar: "0 duplicated",
      pass: duplicated.length === 0,
    },
    {
      measure: "streamed replies (previews POSTed before the reply)",
      value: `${fmt(streamedReplies)} replies previewed, ${fmt(previewCount)} previews; ${fmt(previewsAfterReply)} after their reply`,
      bar: "0 after their reply",
      pass: previewsAfterReply === 0,
    },
    {
      measure: "repeated POSTs of an accepted deliveryId (dropped by the connector)",
      value: `${fmt(repeated.length)}${
        repeated.length
          ? ` (${fmt(repeated.filter((d) => / before kill | while kill /.test(d)).length)} after a kill that came right after the first acceptance)`
          : ""
      }`,
    },
    {
      measure: "replies never delivered (dead)",
      value: `${fmt(dead.length)}${dead.length ? ` (${summarize(count(dead, (d) => `${d.kind}: ${causeOf(d.lastError)}`))})` : ""}`,
    },
    {
      measure: "sub-agent announcements lost",
      value: `${fmt(announcementsLost)} of ${fmt(x.spawns.length)} spawned (${fmt(spawnsRequested)} asked for)`,
    },
    {
      measure: "turns yielded to sub-agents (sessions_yield)",
      value: `${fmt(x.yields.length)} (${fmt(yieldsRequested)} asked for), waiting on ${fmt(x.yields.reduce((n, y) => n + y.waitingOn.length, 0))} sub-agents; ${fmt(yieldRuns)} announcements started a run`,
    },
    {
      measure: "steering messages (/steer)",
      value: `${fmt(steered)} of ${fmt(steersSent.length)} joined a running turn (the rest queued as runs)`,
    },
    {
      measure: "sends (sessions_send) completed",
      value: `${fmt(sendsOk)} target runs ok of ${fmt(x.sends.length)} sent (${fmt(sendsRequested)} asked for; tool answers: ${summarize(sendAnswers)})`,
    },
    { measure: "lost (see definition)", value: fmt(lost.length), bar: "0 lost", pass: lost.length === 0 },
    {
      measure: "kills survived (SIGKILL + restart on the same state)",
      value: `${fmt(x.killsSurvived)} of ${fmt(x.kills.length)}`,
      bar: `≥ ${fmt(minKills)}`,
      pass: x.killsSurvived >= minKills,
    },
    {
      measure: "faults injected",
      value: `model: ${fmt(x.model.counts.r429)}× 429, ${fmt(x.model.counts.r500)}× 500, ${fmt(x.model.counts.slow)} slow of ${fmt(x.model.counts.requests)} requests; connector: ${fmt(x.connector.counts.failed)}× 500, ${fmt(x.connector.counts.hung)} hangs of ${fmt(x.connector.counts.attempts)} attempts; cron fired ${x.cronFired}×`,
    },
    {
      measure: "wall time",
      value: `${(x.wallMs / 1000).toFixed(1)} s${x.settled ? "" : " (did not settle)"}`,
      bar: "within the deadline",
      pass: !x.timedOut,
    },
  ];
  const pass = rows.every((r) => r.pass !== false);
  const lines = [
    `## Switchboard soak — seed ${x.opts.seed}: ${pass ? "PASS" : "FAIL"}`,
    "",
    "| Measure | Value | Bar | Result |",
    "|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${r.measure} | ${r.value} | ${r.bar ?? ""} | ${r.pass === undefined ? "" : r.pass ? "PASS" : "FAIL"} |`,
    ),
    "",
  ];
  if (findings.length) {
    lines.push(`Findings (${findings.length}, first 50):`, ...findings.slice(0, 50).map((f) => `- ${f}`), "");
  }
  return { pass, seed: x.opts.seed, rows, findings, markdown: lines.join("\n") };
}
