/**
 * Property-based tests of `POST /hooks/inbound/:channel` (fast-check, fixed seed, bounded runs):
 * whatever body arrives, signed or not, the answer is the documented JSON error with a 4xx
 * status or a 202, never a 5xx, and a refused request writes nothing.
 */
import { exports } from "cloudflare:workers";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature";
import {
  deepJunk,
  expectErrorShape,
  junk,
  longerThan,
  oddString,
  params,
  rowCounts,
  withProtoKey,
} from "./property-support";
import { actorSettled, fakeConnector, inbound, SECRET, waitRun } from "./support";

/** Statuses a signed inbound request may be refused with (SPEC §13, §17). */
const REFUSALS = [400, 401, 403, 413, 429];

const TIMEOUT = { timeout: 60_000 };

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A valid direct message; `n` keeps message ids apart. */
function valid(n: number): Record<string, unknown> {
  return { messageId: `prop-${n}`, chatType: "direct", from: "prop-user", text: "hello" };
}

/** Each field of the body with values of a type it does not accept. */
const WRONG: Record<string, fc.Arbitrary<unknown>> = (() => {
  const notString = fc.oneof(
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.string()),
    fc.object(),
  );
  const notBool = fc.oneof(fc.integer(), fc.string(), fc.constant(null), fc.object());
  return {
    messageId: fc.oneof(notString, fc.constant("")),
    chatType: fc.oneof(
      notString,
      fc.string().filter((s) => !["direct", "group", "channel"].includes(s)),
    ),
    from: fc.oneof(notString, fc.constant("")),
    text: notString,
    accountId: notString,
    to: notString,
    groupId: fc.oneof(notString, fc.constant("")),
    threadId: fc.oneof(notString, fc.constant("")),
    topic: notBool,
    attachments: fc.oneof(
      notString.filter((v) => !Array.isArray(v)),
      fc.array(fc.oneof(fc.string(), fc.integer()), { minLength: 1 }),
    ),
    senderName: notString,
    conversationLabel: notString,
    groupSubject: notString,
    groupChannel: notString,
    groupSpace: notString,
    agentId: fc.oneof(notString, fc.constant("")),
    timestamp: fc.oneof(fc.string(), fc.boolean(), fc.constant(-1), fc.constant(1.5), fc.object()),
  };
})();

let counter = 0;
let connector: ReturnType<typeof fakeConnector>;
beforeAll(() => {
  connector = fakeConnector();
});
afterAll(() => connector.restore());

/** Sends a signed raw body; a refusal must be a 4xx JSON error and leave every table as it was. */
async function expectRefused(raw: string, statuses = REFUSALS) {
  const before = await rowCounts();
  const res = await inbound("telegram", raw);
  expect(statuses).toContain(res.status);
  await expectErrorShape(res);
  expect(await rowCounts()).toEqual(before);
}

describe("inbound bodies (property-based)", () => {
  it(
    "refuses any signed JSON value that is not a message, with 4xx and nothing written",
    TIMEOUT,
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
          await expectRefused(JSON.stringify(value));
        }),
        params(250),
      );
    },
  );

  it("refuses the right keys with wrong types", TIMEOUT, async () => {
    const fields = Object.keys(WRONG);
    const wrongFields = fc
      .uniqueArray(fc.constantFrom(...fields), { minLength: 1, maxLength: 4 })
      .chain((names) =>
        fc.tuple(...names.map((n) => (WRONG[n] as fc.Arbitrary<unknown>).map((v) => [n, v] as const))),
      );
    await fc.assert(
      fc.asyncProperty(wrongFields, async (pairs) => {
        await expectRefused(JSON.stringify({ ...valid(++counter), ...Object.fromEntries(pairs) }));
      }),
      params(250),
    );
  });

  it("refuses very long strings in any field (400 or 413)", TIMEOUT, async () => {
    // Each field with its documented bound (InboundMessage in src/connectors/inbound-message.ts).
    const BOUNDS: Record<string, number> = {
      messageId: 256,
      from: 256,
      to: 256,
      groupId: 256,
      threadId: 256,
      accountId: 128,
      agentId: 64,
      senderName: 1000,
      groupSubject: 1000,
      text: 200_000,
    };
    const field = fc
      .constantFrom(...Object.keys(BOUNDS))
      .chain((name) => fc.tuple(fc.constant(name), longerThan(BOUNDS[name] as number)));
    await fc.assert(
      fc.asyncProperty(field, async ([name, value]) => {
        await expectRefused(JSON.stringify({ ...valid(++counter), [name]: value }), [400, 413]);
      }),
      params(40),
    );
  });

  it("refuses unknown fields, `__proto__` and deep nesting included", TIMEOUT, async () => {
    const unknownField = fc
      .string({ minLength: 1 })
      .filter((k) => !Object.hasOwn(WRONG, k) && k !== "__proto__");
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(unknownField, fc.constantFrom("constructor", "toString", "prototype", "hasOwnProperty")),
        fc.oneof(junk, deepJunk),
        fc.boolean(),
        async (key, value, proto) => {
          const body = JSON.stringify({ ...valid(++counter), [key]: value });
          await expectRefused(proto ? withProtoKey(body, value) : body, [400, 413]);
        },
      ),
      params(200),
    );
  });

  it("refuses bodies that are not JSON, or junk in place of the whole body", TIMEOUT, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string(),
          fc.string({ unit: "binary" }),
          deepJunk.map((v) => JSON.stringify(v)),
        ),
        async (raw) => {
          // An empty body parses as {} (no params), which is still not a message.
          await expectRefused(raw);
        },
      ),
      params(150),
    );
  });

  it("refuses unsigned and badly signed requests with 401 before reading the body", TIMEOUT, async () => {
    const header = fc.oneof(
      fc.constant(undefined),
      fc.string(),
      // Header values are byte strings: keep the Latin-1 range, minus control characters.
      fc.string({ unit: "binary" }).map((s) => s.replace(/[^\x20-\x7e\xa0-\xff]/g, "")),
      fc.integer({ min: 0, max: 2 ** 40 }).map((t) => `t=${t},v1=${"0".repeat(64)}`),
      fc
        .string({ minLength: 1 })
        .chain((secret) => fc.constant(secret === SECRET ? "nope" : secret).map((s) => `wrong:${s}`)),
    );
    await fc.assert(
      fc.asyncProperty(
        header,
        fc.oneof(fc.jsonValue(), fc.constant(valid(++counter))),
        async (sig, value) => {
          const raw = JSON.stringify(value) ?? "null";
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (sig?.startsWith("wrong:")) headers[SIGNATURE_HEADER] = await signBody(sig.slice(6), raw);
          else if (sig !== undefined) headers[SIGNATURE_HEADER] = sig;
          const before = await rowCounts();
          const res = await exports.default.fetch("http://gw.test/hooks/inbound/telegram", {
            method: "POST",
            headers,
            body: raw,
          });
          expect(res.status).toBe(401);
          await expectErrorShape(res);
          expect(await rowCounts()).toEqual(before);
        },
      ),
      params(150),
    );
  });

  it(
    "accepts valid messages with any unicode (lone surrogates included) or refuses them with 4xx, never 5xx",
    TIMEOUT,
    async () => {
      const text = fc.oneof(oddString, fc.string({ unit: "binary", minLength: 1 }));
      const optional = fc.record(
        {
          senderName: fc.string({ unit: "binary", maxLength: 40 }),
          conversationLabel: oddString,
          threadId: oddString,
          accountId: oddString,
          agentId: oddString,
          to: oddString,
        },
        { requiredKeys: [] },
      );
      let accepted = 0;
      let acceptedSurrogates = 0;
      await fc.assert(
        fc.asyncProperty(text, oddString, oddString, optional, async (body, messageId, from, extra) => {
          const raw = JSON.stringify({ chatType: "direct", messageId, from, text: body, ...extra });
          const before = await rowCounts();
          const res = await inbound("telegram", raw);
          if (res.status === 202) {
            const answer = (await res.json()) as {
              ok: boolean;
              runId: string;
              sessionKey: string;
              status: string;
            };
            expect(answer.ok).toBe(true);
            accepted++;
            if (LONE_SURROGATE.test(body + messageId + from)) acceptedSurrogates++;
            // Synchronises on the run's end and its records, so that the next request starts
            // from still tables.
            if (answer.status === "queued") await waitRun(answer.runId);
            await actorSettled(answer.sessionKey);
            return;
          }
          expect(REFUSALS).toContain(res.status);
          await expectErrorShape(res);
          expect(await rowCounts()).toEqual(before);
        }),
        params(60),
      );
      // The property is about accepted messages too: most generated ones are valid.
      expect(accepted).toBeGreaterThan(20);
      expect(acceptedSurrogates).toBeGreaterThan(0);
    },
  );
});
