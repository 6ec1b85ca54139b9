/**
 * Run ids that name their session (SPEC §5: a run id is a UUID). A run id's first 64 bits (its
 * first 18 characters, the version nibble among them) are a hash of the session key, its last 64
 * a hash of what makes the run unique (a message id, an idempotency key) or random bits. So a run
 * id handed out before any D1 row holds it (a connector's message is acknowledged once its actor
 * holds it, and recorded behind) still leads to its session: the key's prefix is registered when
 * its actor first binds (`run_prefixes`), and `runs.get` / `agent.wait` ask that actor.
 * Pure: no I/O (a WebCrypto digest of the seed).
 */

import { fnv1a32 } from "../hash";

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
 * 64 bits naming a session key: two 32-bit FNV-1a hashes with different offsets. Not a
 * cryptographic hash (nothing depends on it being hard to collide: a collision only means two
 * sessions are asked about a run id), and synchronous, so it costs a message no WebCrypto call.
 */
function keyHash(key: string): Uint8Array {
  let b = 0x050c5d1f;
  for (let i = 0; i < key.length; i++) {
    b = Math.imul(b ^ key.charCodeAt(i), 0x01000193);
    b ^= b >>> 13;
  }
  const out = new Uint8Array(8);
  // The first 32 bits are the key's FNV-1a: db/placement.ts picks the session's database from them.
  new DataView(out.buffer).setUint32(0, fnv1a32(key));
  new DataView(out.buffer).setUint32(4, b >>> 0);
  return out;
}

/**
 * A run id of the session `sessionKey`: stable for the same `seed` (the same message or
 * idempotency key gives the same id, so a repeat is the same run), random without one.
 */
export async function runIdFor(sessionKey: string, seed?: string): Promise<string> {
  const seedHash =
    seed === undefined ? crypto.getRandomValues(new Uint8Array(8)) : await digest(`run:${seed}`);
  const bytes = new Uint8Array(16);
  bytes.set(keyHash(sessionKey), 0);
  bytes.set(seedHash.subarray(0, 8), 8);
  return uuidOf(bytes);
}

/** The part of a run id that names its session, as `runIdFor` makes it for that key. */
export function runIdPrefixOfKey(sessionKey: string): string {
  return runIdPrefix(uuidOf(new Uint8Array([...keyHash(sessionKey), 0, 0, 0, 0, 0, 0, 0, 0])));
}

/** The part of any run id that names its session (its first 18 characters, lowercased). */
export function runIdPrefix(runId: string): string {
  return runId.trim().slice(0, 18).toLowerCase();
}
