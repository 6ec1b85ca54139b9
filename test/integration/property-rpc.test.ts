/**
 * Property-based tests of `POST /rpc/:method` (fast-check, fixed seed, bounded runs): for every
 * method of the RPC table, random params (wrong types, junk, huge strings, unicode, `__proto__`
 * keys) get a 2xx or the documented 4xx JSON error, never a 5xx; 404 only from methods that look
 * something up; and a refused call writes nothing.
 */
import { exports } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { METHODS } from "../../src/rpc/methods";
import {
  expectErrorShape,
  junk,
  longString,
  oddString,
  params,
  rowCounts,
  withProtoKey,
} from "./property-support";
import { rpc, TOKEN, waitRun } from "./support";

const TIMEOUT = { timeout: 60_000 };

/** Methods that name a session, a run or a label, and may therefore answer 404. */
const LOOKUPS = new Set([
  "sessions.resolve",
  "sessions.get",
  "sessions.patch",
  "sessions.reset",
  "sessions.delete",
  "sessions.compact",
  "chat.history",
  "chat.send",
  "agent.wait",
  "runs.get",
  "deliveries.retry",
  // A connector by channel, a pairing code.
  "pairing.approve",
  "pairing.list",
  "pairing.revoke",
  "connectors.setup",
  "connectors.check",
]);

/** Refusals an operator call may get (SPEC §17); 413 for bodies over 1 MB. */
const REFUSALS = [400, 403, 404, 409, 413, 429];

const NAMES = Object.keys(METHODS);

function paramKeys(name: string): string[] {
  const params = METHODS[name]?.params as unknown as { shape?: Record<string, unknown> } | undefined;
  const shape = params?.shape;
  return shape ? Object.keys(shape) : [];
}

/** Session keys, session ids and run ids that exist (seeded below). */
const existing = { key: ["main"], sessionId: [] as string[], runId: [] as string[] };

/** One of the seeded names of a kind (read when the value is generated, after the seeding). */
function seeded(kind: keyof typeof existing): fc.Arbitrary<string> {
  return fc.constant(kind).chain((k) => fc.constantFrom(...existing[k], "missing"));
}

/** Values that might pass a param's schema, by param name. */
const PLAUSIBLE: Record<string, fc.Arbitrary<unknown>> = {
  key: seeded("key"),
  sessionKey: seeded("key"),
  sessionId: seeded("sessionId"),
  runId: seeded("runId"),
  label: fc.constantFrom("hello", "other", null),
  agentId: fc.constantFrom("main", "other"),
  message: fc.oneof(fc.string({ minLength: 1 }), oddString),
  model: fc.constantFrom("echo/echo", "fake/x", null),
  thinkingLevel: fc.constantFrom("off", "low", "high", null),
  verboseLevel: fc.constantFrom("off", "on", null),
  sendPolicy: fc.constantFrom("allow", "deny", null),
  status: fc.constantFrom("pending", "dead"),
  kinds: fc.constant(["main", "other"]),
  archived: fc.constantFrom(true, false, "all"),
  instructions: fc.string({ minLength: 1, maxLength: 50 }),
  deleteTranscript: fc.boolean(),
  timeoutMs: fc.constantFrom(0, 1),
  timeoutSeconds: fc.constantFrom(0, 60),
  channel: fc.constantFrom("telegram", "slack", "nope"),
  code: fc.constantFrom("ABCD2345", "nope"),
  peerId: fc.constantFrom("1", "someone"),
  url: fc.constantFrom("https://bot.example.com", "not a url"),
};

/** Values that might pass some schema: names, small numbers, booleans, null. */
const plausible = fc.oneof(
  fc.constantFrom("main", "global", "unknown", "agent:main:main", "hello", "off", "deny", "echo/echo"),
  fc.integer({ min: -5, max: 2_000 }),
  fc.boolean(),
  fc.constant(null),
  oddString,
);

/** `null` four times in five, else a value. */
function rarely<T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
}

/** A params object with some of the method's own keys (plausible or junk values), maybe unknown keys. */
function paramsFor(name: string) {
  const keys = paramKeys(name);
  const known = keys.length
    ? fc
        .oneof(fc.constant(keys), fc.uniqueArray(fc.constantFrom(...keys), { maxLength: keys.length }))
        .chain((chosen) =>
          fc.tuple(
            ...chosen.map((k) =>
              fc
                .oneof(
                  { weight: 4, arbitrary: PLAUSIBLE[k] ?? plausible },
                  { weight: 1, arbitrary: plausible },
                  { weight: 1, arbitrary: junk },
                )
                .map((v) => [k, v] as const),
            ),
          ),
        )
    : fc.constant([] as Array<readonly [string, unknown]>);
  const extra = rarely(fc.tuple(fc.string({ minLength: 1 }), junk));
  return fc.tuple(known, extra).map(([pairs, more]) => {
    const out: Record<string, unknown> = Object.fromEntries(pairs);
    if (more && !Object.hasOwn(out, more[0]) && more[0] !== "__proto__") out[more[0]] = more[1];
    return out;
  });
}

/** The raw JSON text of a call: the params, or junk in their place, maybe with a `__proto__` key. */
const call = fc.constantFrom(...NAMES).chain((name) =>
  fc
    .tuple(fc.oneof({ weight: 4, arbitrary: paramsFor(name) }, { weight: 1, arbitrary: junk }), rarely(junk))
    .map(([value, proto]) => {
      const text = JSON.stringify(value) ?? "null";
      return { name, body: proto !== null && text.startsWith("{") ? withProtoKey(text, proto) : text };
    }),
);

async function post(name: string, body: string) {
  return exports.default.fetch(`http://gw.test/rpc/${encodeURIComponent(name)}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body,
  });
}

beforeAll(async () => {
  for (const key of ["agent:main:prop-a", "agent:main:prop-b", "agent:main:main"]) {
    const res = await rpc<{ runId: string; sessionKey: string; sessionId: string }>("agent", {
      message: "seed",
      sessionKey: key,
    });
    await waitRun(res.payload.runId);
    existing.key.push(res.payload.sessionKey);
    existing.sessionId.push(res.payload.sessionId);
    existing.runId.push(res.payload.runId);
  }
  await rpc("sessions.patch", { key: "agent:main:prop-a", label: "hello" });
});

/** Not a URI: a lone surrogate cannot be percent-encoded (nor sent as a path). */
function encodable(name: string): boolean {
  try {
    encodeURIComponent(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * One call's checks: a 200 (whose queued run is waited for, so that the next call starts from
 * still tables), or a documented refusal that wrote nothing; 404 only from a lookup.
 */
async function check(name: string, body: string): Promise<number> {
  const before = await rowCounts();
  const res = await post(name, body);
  if (res.status === 200) {
    const answer = (await res.json()) as { ok: boolean; payload: { runId?: unknown } };
    expect(answer.ok).toBe(true);
    if (typeof answer.payload.runId === "string" && name !== "runs.get" && name !== "agent.wait") {
      await waitRun(answer.payload.runId);
    }
    return res.status;
  }
  expect(REFUSALS).toContain(res.status);
  const { message } = await expectErrorShape(res);
  if (res.status === 404) expect(LOOKUPS.has(name), `${name}: ${message}`).toBe(true);
  expect(await rowCounts()).toEqual(before);
  return res.status;
}

describe("RPC params (property-based)", () => {
  it(
    "answers every method's random params with 200 or a documented 4xx, never a 5xx; a refusal writes nothing",
    TIMEOUT,
    async () => {
      const seen = new Map<string, Set<number>>();
      await fc.assert(
        fc.asyncProperty(call, async ({ name, body }) => {
          const status = await check(name, body);
          seen.set(name, (seen.get(name) ?? new Set<number>()).add(status));
        }),
        params(300),
      );
      // Every method was reached, and calls got through validation too (not only 400s).
      expect([...seen.keys()].sort()).toEqual([...NAMES].sort());
      expect([...seen.values()].filter((s) => s.has(200)).length).toBeGreaterThan(NAMES.length / 2);
    },
  );

  it(
    "answers huge strings in any param with 200 (where no bound applies), 400 or 413, never a 5xx",
    TIMEOUT,
    async () => {
      const huge = fc
        .constantFrom(...NAMES)
        .chain((name) =>
          fc.tuple(
            fc.constant(name),
            fc.constantFrom(...(paramKeys(name).length ? paramKeys(name) : ["x"])),
            longString,
          ),
        );
      await fc.assert(
        fc.asyncProperty(huge, async ([name, key, value]) => {
          expect([200, 400, 404, 413]).toContain(await check(name, JSON.stringify({ [key]: value })));
        }),
        params(40),
      );
    },
  );

  it("answers any other method name with 404 NOT_FOUND", TIMEOUT, async () => {
    const name = fc
      .oneof(
        fc.string({ minLength: 1 }),
        fc.string({ unit: "binary", minLength: 1 }),
        fc.constantFrom("constructor", "__proto__", "toString", "valueOf", "hasOwnProperty"),
      )
      .filter((n) => !Object.hasOwn(METHODS, n) && n !== "." && n !== ".." && encodable(n));
    await fc.assert(
      fc.asyncProperty(name, async (n) => {
        const res = await post(n, "{}");
        expect(res.status).toBe(404);
        const { code } = await expectErrorShape(res);
        expect(code).toBe("NOT_FOUND");
      }),
      params(150),
    );
  });
});
