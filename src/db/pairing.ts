/**
 * Named D1 queries of chat access (SPEC §18): pairing codes, the senders operators approved,
 * and the count of refused messages per channel and reason.
 */
import { and, asc, count, eq, gt, lte, sql } from "drizzle-orm";
import { homeDatabase } from "./placement";
import { database } from "./queries";
import { accessRefusals, pairedSenders, pairingCodes } from "./schema";

/** A pairing code is valid this long. */
export const PAIRING_CODE_TTL_MS = 3_600_000;
/** At most this many codes wait for approval per connector. */
export const MAX_PENDING_CODES = 3;

export type PairingCode = typeof pairingCodes.$inferSelect;
export type PairedSender = typeof pairedSenders.$inferSelect;

export async function isPaired(env: Env, channel: string, peerId: string): Promise<boolean> {
  const row = await database(homeDatabase(env))
    .select({ peerId: pairedSenders.peerId })
    .from(pairedSenders)
    .where(and(eq(pairedSenders.channel, channel), eq(pairedSenders.peerId, peerId)))
    .get();
  return row !== undefined;
}

/**
 * A new code for a sender, or undefined when it has one pending already (it got its notice) or
 * the connector has MAX_PENDING_CODES pending. Expired codes are dropped first.
 */
export async function offerPairingCode(
  env: Env,
  f: { channel: string; accountId: string; peerId: string; code: string; now: number },
): Promise<string | undefined> {
  const db = database(homeDatabase(env));
  const [, pending] = await db.batch([
    db
      .delete(pairingCodes)
      .where(and(eq(pairingCodes.channel, f.channel), lte(pairingCodes.expiresAt, f.now))),
    db
      .select({ peerId: pairingCodes.peerId })
      .from(pairingCodes)
      .where(eq(pairingCodes.channel, f.channel))
      .limit(MAX_PENDING_CODES + 1),
  ]);
  if (pending.some((p) => p.peerId === f.peerId) || pending.length >= MAX_PENDING_CODES) return undefined;
  const inserted = await db
    .insert(pairingCodes)
    .values({
      channel: f.channel,
      code: f.code,
      accountId: f.accountId,
      peerId: f.peerId,
      createdAt: f.now,
      expiresAt: f.now + PAIRING_CODE_TTL_MS,
    })
    .onConflictDoNothing()
    .returning({ code: pairingCodes.code });
  return inserted[0]?.code;
}

/** Approves a pending, unexpired code: its sender is allowed from now on. */
export async function approvePairingCode(
  env: Env,
  channel: string,
  code: string,
  now: number,
): Promise<PairingCode | undefined> {
  const db = database(homeDatabase(env));
  const row = await db
    .select()
    .from(pairingCodes)
    .where(
      and(eq(pairingCodes.channel, channel), eq(pairingCodes.code, code), gt(pairingCodes.expiresAt, now)),
    )
    .get();
  if (!row) return undefined;
  await db.batch([
    db.insert(pairedSenders).values({ channel, peerId: row.peerId, approvedAt: now }).onConflictDoNothing(),
    db.delete(pairingCodes).where(and(eq(pairingCodes.channel, channel), eq(pairingCodes.code, code))),
  ]);
  return row;
}

export async function listPairing(
  env: Env,
  channel: string | undefined,
  now: number,
): Promise<{ pending: PairingCode[]; approved: PairedSender[] }> {
  const db = database(homeDatabase(env));
  const [pending, approved] = await db.batch([
    db
      .select()
      .from(pairingCodes)
      .where(
        channel
          ? and(eq(pairingCodes.channel, channel), gt(pairingCodes.expiresAt, now))
          : gt(pairingCodes.expiresAt, now),
      )
      .orderBy(asc(pairingCodes.createdAt))
      .limit(200),
    db
      .select()
      .from(pairedSenders)
      .where(channel ? eq(pairedSenders.channel, channel) : undefined)
      .orderBy(asc(pairedSenders.approvedAt))
      .limit(1000),
  ]);
  return { pending, approved };
}

export async function revokePairedSender(env: Env, channel: string, peerId: string): Promise<boolean> {
  const removed = await database(homeDatabase(env))
    .delete(pairedSenders)
    .where(and(eq(pairedSenders.channel, channel), eq(pairedSenders.peerId, peerId)))
    .returning({ peerId: pairedSenders.peerId });
  return removed.length > 0;
}

export async function countRefusal(env: Env, channel: string, reason: string, now: number): Promise<void> {
  await database(homeDatabase(env))
    .insert(accessRefusals)
    .values({ channel, reason, count: 1, lastAt: now })
    .onConflictDoUpdate({
      target: [accessRefusals.channel, accessRefusals.reason],
      set: { count: sql`${accessRefusals.count} + 1`, lastAt: now },
    });
}

/** Refused messages per channel and reason. */
export async function refusalCounts(env: Env): Promise<Record<string, Record<string, number>>> {
  const rows = await database(homeDatabase(env)).select().from(accessRefusals).limit(1000).all();
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) {
    const channel = out[r.channel] ?? {};
    channel[r.reason] = r.count;
    out[r.channel] = channel;
  }
  return out;
}

/** How many codes wait for approval (for the dashboard's badge). */
export async function pendingCodes(env: Env, now: number): Promise<number> {
  const row = await database(homeDatabase(env))
    .select({ n: count() })
    .from(pairingCodes)
    .where(gt(pairingCodes.expiresAt, now))
    .get();
  return row?.n ?? 0;
}
