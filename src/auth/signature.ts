/**
 * Connector request signatures (SPEC §14): `x-switchboard-signature: t=<unix seconds>,v1=<hex
 * HMAC-SHA256 of "<t>.<raw body>">`. Used to verify inbound webhooks and to sign deliveries.
 */
export const SIGNATURE_HEADER = "x-switchboard-signature";
export const MAX_SKEW_SECONDS = 300;

const encoder = new TextEncoder();

/** HMAC-SHA256 of `message` under `secret`, as lowercase hex. */
/**
 * HMAC keys by secret, imported once per isolate: every inbound message is verified and every
 * delivery signed with one of a few connector secrets. Bounded; a failed import is not kept.
 */
const hmacKeys = new Map<string, Promise<CryptoKey>>();
const HMAC_KEYS_MAX = 64;

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = hmacKeys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
    ]);
    key.catch(() => hmacKeys.delete(secret));
    if (hmacKeys.size >= HMAC_KEYS_MAX) hmacKeys.clear();
    hmacKeys.set(secret, key);
  }
  return key;
}

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

export async function hmacHex(secret: string, message: string): Promise<string> {
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(message)),
  );
  let hex = "";
  for (let i = 0; i < mac.length; i++) hex += HEX[mac[i] ?? 0];
  return hex;
}

export async function signBody(secret: string, body: string, nowMs = Date.now()): Promise<string> {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${await hmacHex(secret, `${t}.${body}`)}`;
}

/** Constant-time string comparison (hashes both sides so lengths do not leak either). */
export async function safeEqual(a: string, b: string): Promise<boolean> {
  return sameDigest(
    await crypto.subtle.digest("SHA-256", encoder.encode(a)),
    await crypto.subtle.digest("SHA-256", encoder.encode(b)),
  );
}

/**
 * `given` (untrusted) equals `secret` (a configured token), in time that depends only on the
 * length of `given`: every character of it is compared (against the secret, cycled), and a
 * length mismatch counts as a difference. No hashing, so a request's token check is cheap.
 */
export function equalsSecret(given: string, secret: string): boolean {
  if (secret.length === 0) return false;
  let diff = given.length ^ secret.length;
  for (let i = 0; i < given.length; i++) diff |= given.charCodeAt(i) ^ secret.charCodeAt(i % secret.length);
  return diff === 0;
}

function sameDigest(ha: ArrayBuffer, hb: ArrayBuffer): boolean {
  // Constant-time over the fixed-size digests (portable: works in Workers and in Node).
  const x = new Uint8Array(ha);
  const y = new Uint8Array(hb);
  let diff = x.length ^ y.length;
  for (let i = 0; i < x.length; i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

export async function verifySignature(
  secret: string,
  header: string | null | undefined,
  body: string,
  nowMs = Date.now(),
): Promise<SignatureCheck> {
  if (!header) return { ok: false, reason: `missing ${SIGNATURE_HEADER} header` };
  const fields = new Map<string, string>();
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const t = fields.get("t");
  const v1 = fields.get("v1");
  if (!t || !/^\d+$/.test(t) || !v1) {
    return {
      ok: false,
      reason: `malformed ${SIGNATURE_HEADER} header: expected t=<unix seconds>,v1=<hex hmac>`,
    };
  }
  const skew = Math.abs(nowMs / 1000 - Number(t));
  if (skew > MAX_SKEW_SECONDS) {
    return {
      ok: false,
      reason: `signature timestamp is ${Math.round(skew)}s away from now (max ${MAX_SKEW_SECONDS}s)`,
    };
  }
  const expected = await hmacHex(secret, `${t}.${body}`);
  // Constant time in what the caller sent; the expected MAC is the secret side.
  if (!equalsSecret(v1.toLowerCase(), expected)) return { ok: false, reason: "signature does not match" };
  return { ok: true };
}

/** A stable UUID derived from a string (SHA-256, version nibble 8): same input, same id. */
export async function stableUuid(input: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(input)));
  digest[6] = ((digest[6] ?? 0) & 0x0f) | 0x80;
  digest[8] = ((digest[8] ?? 0) & 0x3f) | 0x80;
  const hex = [...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
