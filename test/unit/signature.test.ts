import { describe, expect, it, vi } from "vitest";
import {
  equalsSecret,
  MAX_SKEW_SECONDS,
  SIGNATURE_HEADER,
  safeEqual,
  signBody,
  stableUuid,
  verifySignature,
} from "../../src/auth/signature";

const SECRET = "connector-secret";
const BODY = JSON.stringify({ messageId: "m-1", chatType: "direct", from: "alice", text: "hi" });
// 2025-06-01T12:00:00.250Z: a fractional second, so the header must floor it.
const NOW = Date.UTC(2025, 5, 1, 12, 0, 0, 250);
const T = Math.floor(NOW / 1000);

async function hmacHex(secret: string, message: string): Promise<string> {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey(
    "raw",
    enc.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(message)));
  return [...mac].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("signBody", () => {
  it("produces t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<raw body>'>", async () => {
    const header = await signBody(SECRET, BODY, NOW);
    expect(header).toBe(`t=${T},v1=${await hmacHex(SECRET, `${T}.${BODY}`)}`);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  });

  it("names the header x-switchboard-signature and allows 5 minutes of skew", () => {
    expect(SIGNATURE_HEADER).toBe("x-switchboard-signature");
    expect(MAX_SKEW_SECONDS).toBe(300);
  });
});

describe("verifySignature", () => {
  it("accepts what signBody produced for the same secret and body", async () => {
    const header = await signBody(SECRET, BODY, NOW);
    expect(await verifySignature(SECRET, header, BODY, NOW)).toEqual({ ok: true });
  });

  it("accepts a header built by hand by a connector (spaces after the comma, upper-case hex)", async () => {
    const mac = await hmacHex(SECRET, `${T}.${BODY}`);
    expect(await verifySignature(SECRET, `t=${T}, v1=${mac.toUpperCase()}`, BODY, NOW)).toEqual({ ok: true });
  });

  it("refuses a tampered body", async () => {
    const header = await signBody(SECRET, BODY, NOW);
    const tampered = BODY.replace('"hi"', '"hI"');
    expect(await verifySignature(SECRET, header, tampered, NOW)).toEqual({
      ok: false,
      reason: "signature does not match",
    });
  });

  it("imports each secret's key once, and still tells secrets apart", async () => {
    const imports = vi.spyOn(crypto.subtle, "importKey");
    try {
      const secret = `once-${crypto.randomUUID()}`;
      const other = `${secret}-other`;
      for (let i = 0; i < 3; i++) {
        expect(
          await verifySignature(secret, await signBody(secret, `${BODY}${i}`, NOW), `${BODY}${i}`, NOW),
        ).toEqual({
          ok: true,
        });
      }
      expect(imports).toHaveBeenCalledTimes(1);
      expect((await verifySignature(other, await signBody(secret, BODY, NOW), BODY, NOW)).ok).toBe(false);
      expect(imports).toHaveBeenCalledTimes(2);
    } finally {
      imports.mockRestore();
    }
  });

  it("refuses a body signed with another secret", async () => {
    const header = await signBody("another-secret", BODY, NOW);
    expect(await verifySignature(SECRET, header, BODY, NOW)).toEqual({
      ok: false,
      reason: "signature does not match",
    });
  });

  it("refuses a signature whose timestamp was changed after signing", async () => {
    const header = await signBody(SECRET, BODY, NOW);
    const moved = header.replace(`t=${T}`, `t=${T + 1}`);
    expect(await verifySignature(SECRET, moved, BODY, NOW)).toEqual({
      ok: false,
      reason: "signature does not match",
    });
  });

  it("accepts exactly 300 s of skew in both directions", async () => {
    const header = await signBody(SECRET, BODY, T * 1000);
    expect(await verifySignature(SECRET, header, BODY, (T + 300) * 1000)).toEqual({ ok: true });
    expect(await verifySignature(SECRET, header, BODY, (T - 300) * 1000)).toEqual({ ok: true });
  });

  it("refuses a signature more than 300 s old (replay)", async () => {
    const header = await signBody(SECRET, BODY, T * 1000);
    expect(await verifySignature(SECRET, header, BODY, (T + 301) * 1000)).toEqual({
      ok: false,
      reason: "signature timestamp is 301s away from now (max 300s)",
    });
  });

  it("refuses a signature more than 300 s in the future", async () => {
    const header = await signBody(SECRET, BODY, T * 1000);
    expect(await verifySignature(SECRET, header, BODY, (T - 301) * 1000)).toEqual({
      ok: false,
      reason: "signature timestamp is 301s away from now (max 300s)",
    });
  });

  it("refuses a missing header, naming it", async () => {
    for (const header of [undefined, null, ""]) {
      expect(await verifySignature(SECRET, header, BODY, NOW)).toEqual({
        ok: false,
        reason: "missing x-switchboard-signature header",
      });
    }
  });

  it.each([
    ["no fields", "garbage"],
    ["no v1", `t=${T}`],
    ["no t", "v1=abcdef"],
    ["a non-numeric t", "t=yesterday,v1=abcdef"],
    ["a negative t", `t=-${T},v1=abcdef`],
    ["an empty v1", `t=${T},v1=`],
  ])("refuses a malformed header (%s) and says what it expects", async (_name, header) => {
    expect(await verifySignature(SECRET, header, BODY, NOW)).toEqual({
      ok: false,
      reason: "malformed x-switchboard-signature header: expected t=<unix seconds>,v1=<hex hmac>",
    });
  });

  it("refuses a v1 that is a prefix of the right digest", async () => {
    const mac = await hmacHex(SECRET, `${T}.${BODY}`);
    expect(await verifySignature(SECRET, `t=${T},v1=${mac.slice(0, 32)}`, BODY, NOW)).toEqual({
      ok: false,
      reason: "signature does not match",
    });
  });
});

describe("stableUuid", () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  it("returns the same UUID for the same input", async () => {
    const a = await stableUuid("inbound:telegram:default:m-1");
    expect(await stableUuid("inbound:telegram:default:m-1")).toBe(a);
  });

  it("is UUID-shaped with version nibble 8 and the RFC variant", async () => {
    for (const input of ["", "a", "rpc:key-1", "x".repeat(10_000)]) {
      expect(await stableUuid(input)).toMatch(UUID);
    }
  });

  it("returns different UUIDs for different inputs", async () => {
    const ids = await Promise.all(["rpc:a", "rpc:b", "rpc:A", "rpc:a "].map((s) => stableUuid(s)));
    expect(new Set(ids).size).toBe(4);
  });

  it("is the first 16 bytes of SHA-256 of the input with version and variant bits set", async () => {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("abc")));
    digest[6] = ((digest[6] ?? 0) & 0x0f) | 0x80;
    digest[8] = ((digest[8] ?? 0) & 0x3f) | 0x80;
    const hex = [...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect((await stableUuid("abc")).replaceAll("-", "")).toBe(hex);
  });
});

describe("safeEqual", () => {
  it("is true for equal strings", async () => {
    expect(await safeEqual("test-token", "test-token")).toBe(true);
    expect(await safeEqual("", "")).toBe(true);
  });

  it("is false for strings that differ in one character", async () => {
    expect(await safeEqual("test-token", "test-tokeN")).toBe(false);
  });

  it("is false when one string is a prefix of the other", async () => {
    expect(await safeEqual("test-token", "test-token-longer")).toBe(false);
    expect(await safeEqual("test-token", "test")).toBe(false);
    expect(await safeEqual("", "x")).toBe(false);
  });

  it("compares unicode by content", async () => {
    expect(await safeEqual("clé-é", "clé-é")).toBe(true);
    expect(await safeEqual("clé-é", "cle-e")).toBe(false);
  });
});

describe("equalsSecret", () => {
  it("is true only for the secret itself", () => {
    expect(equalsSecret("test-token", "test-token")).toBe(true);
    expect(equalsSecret("test-tokeN", "test-token")).toBe(false);
    expect(equalsSecret("test-token-longer", "test-token")).toBe(false);
    expect(equalsSecret("test", "test-token")).toBe(false);
    // A repetition of the secret matches it character by character, and is still refused.
    expect(equalsSecret("abcabc", "abc")).toBe(false);
    expect(equalsSecret("", "x")).toBe(false);
    expect(equalsSecret("", "")).toBe(false);
    expect(equalsSecret("clé-é", "clé-é")).toBe(true);
    expect(equalsSecret("cle-e", "clé-é")).toBe(false);
  });
});
