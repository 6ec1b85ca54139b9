/**
 * Run ids that name their session (SPEC §5: a run id is a UUID). A run id's first 64 bits (its
 * first 18 characters, the version nibble among them) are a hash of the session key, its last 64
 * a hash of what makes the run unique (a message id, an idempotency key) or random bits. So a run
 * id handed out before any D1 row holds it (a connector's message is acknowledged once its actor
 * holds it, and recorded behind) still leads to its session: the key's prefix is registered when
 * its actor first binds (`run_prefixes`), and `runs.get` / `agent.wait` ask that actor.
 * Pure: no I/O (WebCrypto digests only).
 */

const encoder = new TextEncoder();

async function digest(input: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(input)));
}

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/** The UUID (version 8, RFC 9562 variant) of 16 bytes. */
function uuidOf(bytes: Uint8Array): string {
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x80;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const h = hex(bytes);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * A run id of the session `sessionKey`: stable for the same `seed` (the same message or
 * idempotency key gives the same id, so a repeat is the same run), random without one.
 */
export async function runIdFor(sessionKey: string, seed?: string): Promise<string> {
  const [keyHash, seedHash] = await Promise.all([
    digest(`session:${sessionKey}`),
    seed === undefined ? crypto.getRandomValues(new Uint8Array(8)) : digest(`run:${seed}`),
  ]);
  const bytes = new Uint8Array(16);
  bytes.set(keyHash.subarray(0, 8), 0);
  bytes.set(seedHash.subarray(0, 8), 8);
  return uuidOf(bytes);
}

/** The part of a run id that names its session, as `runIdFor` makes it for that key. */
export async function runIdPrefixOfKey(sessionKey: string): Promise<string> {
  return runIdPrefix(await runIdFor(sessionKey, ""));
}

/** The part of any run id that names its session (its first 18 characters, lowercased). */
export function runIdPrefix(runId: string): string {
  return runId.trim().slice(0, 18).toLowerCase();
}
