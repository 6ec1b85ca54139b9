/**
 * `session` in SWITCHBOARD_CONFIG (SPEC §2, §10, §15): how session keys are made (scope, DM
 * scope, main key, identityLinks, case-sensitive channels), the reset policies and their legacy
 * forms (resolved to one effective `reset`), send policy, agent-to-agent limits, the run queue,
 * retention and write-behind.
 */
import { z } from "zod";
import { identityLinkPeerId } from "../keys/ids";
import { formatValue, Id, intBetween, NonEmpty, PositiveInt, TimeZone } from "./fields";

const ChatType = z.enum(["direct", "group", "channel", "thread"]);
export type ChatType = z.output<typeof ChatType>;

const ResetFields = z.strictObject({
  mode: z.enum(["daily", "idle"]).default("daily"),
  atHour: intBetween(0, 23).default(4),
  idleMinutes: PositiveInt.optional(),
});

/**
 * A reset policy (SPEC §10). Daily mode also honours `idleMinutes` when set (whichever expires
 * first wins); idle mode uses `idleMinutes` only and so needs it.
 */
export const ResetPolicySchema = ResetFields.superRefine((reset, ctx) => {
  if (reset.mode === "idle" && reset.idleMinutes === undefined) {
    ctx.addIssue({ code: "custom", path: ["idleMinutes"], message: 'is required when mode is "idle"' });
  }
});
export type ResetPolicy = z.output<typeof ResetPolicySchema>;

export const DEFAULT_RESET_POLICY: ResetPolicy = Object.freeze({ mode: "daily", atHour: 4 });

const SendPolicyRuleSchema = z.strictObject({
  action: z.enum(["allow", "deny"]),
  match: z
    .strictObject({
      channel: NonEmpty.optional(),
      /** OpenClaw's older name of `channel`, read as it. */
      provider: NonEmpty.optional(),
      chatType: ChatType.optional(),
      keyPrefix: NonEmpty.optional(),
      rawKeyPrefix: NonEmpty.optional(),
    })
    .superRefine((m, ctx) => {
      if (m.provider !== undefined && m.channel !== undefined && m.provider !== m.channel) {
        ctx.addIssue({
          code: "custom",
          path: ["provider"],
          message: `is the older name of \`channel\`; give one of them (got channel "${m.channel}" and provider "${m.provider}")`,
        });
      }
    })
    .transform(({ provider, ...m }) =>
      provider !== undefined ? { ...m, channel: m.channel ?? provider } : m,
    )
    .prefault({}),
});
export type SendPolicyRule = z.output<typeof SendPolicyRuleSchema>;

export const SendPolicyConfigSchema = z.strictObject({
  rules: z.array(SendPolicyRuleSchema).default(() => []),
  default: z.enum(["allow", "deny"]).default("allow"),
});
export type SendPolicyConfig = z.output<typeof SendPolicyConfigSchema>;

/** An identityLinks name becomes the peer id of DM keys (SPEC §2), so it needs some non-blank text. */
const IdentityLinkName = z.string().refine((name) => identityLinkPeerId(name) !== "", {
  error: (iss) =>
    `must contain more than whitespace: it becomes the peer id in the person's DM session keys (got ${formatValue(iss.input)})`,
});

const SessionFields = z.strictObject({
  scope: z.enum(["per-sender", "global"]).default("per-sender"),
  dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
  mainKey: Id.default("main"),
  timezone: TimeZone.default("UTC"),
  identityLinks: z.record(IdentityLinkName, z.array(NonEmpty)).default(() => ({})),
  caseSensitiveChannels: z.array(Id).default(() => ["signal", "matrix"]),
  // Mode "idle" may take its minutes from the legacy `idleMinutes`, so this one is checked below.
  reset: ResetFields.optional(),
  /** Legacy: see `withEffectiveReset`. */
  idleMinutes: PositiveInt.optional(),
  resetByType: z
    .strictObject({
      direct: ResetPolicySchema.optional(),
      group: ResetPolicySchema.optional(),
      thread: ResetPolicySchema.optional(),
    })
    .prefault({}),
  resetByChannel: z.record(Id, ResetPolicySchema).default(() => ({})),
  resetTriggers: z.array(NonEmpty).default(() => ["/new", "/reset"]),
  sendPolicy: SendPolicyConfigSchema.prefault({}),
  agentToAgent: z
    .strictObject({
      maxPingPongTurns: intBetween(0, 5).default(5),
      maxHops: PositiveInt.default(12),
    })
    .prefault({}),
  queue: z
    .strictObject({
      /**
       * What a message does while a run of the session is running (SPEC §20): `followup` queues
       * it, `collect` merges it into the waiting run, `steer` adds it to the running run before
       * its next model step, `interrupt` aborts the running run and queues it.
       */
      mode: z.enum(["followup", "collect", "steer", "interrupt"]).default("followup"),
      cap: PositiveInt.default(50),
    })
    .prefault({}),
  retention: z.strictObject({ days: PositiveInt.optional() }).prefault({}),
  /**
   * A connector's message is recorded in D1 (entry, run, inputs) with its run's
   * next write, at most a second after the ack, instead of before the ack: one D1 round trip
   * per message instead of two. `false` records it before the ack.
   */
  writeBehind: z.boolean().default(true),
  /**
   * OpenClaw's path of its session store file. Accepted so that an OpenClaw config loads, and
   * ignored: the session index lives in D1 (`status` says so).
   */
  store: z.string().optional(),
});

/**
 * Resolves the effective default reset policy, so `session.reset` is always defined after parsing:
 * - `session.reset` set: used as is; its `idleMinutes` falls back to the legacy `session.idleMinutes`.
 * - Legacy rule (SPEC §10): `session.idleMinutes` set with neither `reset` nor any `resetByType`
 *   entry → idle-only, `{ mode: "idle", idleMinutes }`.
 * - `session.idleMinutes` with `resetByType` entries but no `reset` → daily at 4 plus that idle
 *   limit (as OpenClaw resolves it).
 * - Otherwise daily at 04:00 in `session.timezone`.
 * `resetByType` / `resetByChannel` entries replace this policy whole for their chat type/channel.
 */
function withEffectiveReset(session: z.output<typeof SessionFields>) {
  const { reset, idleMinutes: legacyIdle, resetByType } = session;
  const hasTypeResets = Object.values(resetByType).some((policy) => policy !== undefined);
  let effective: ResetPolicy;
  if (reset) {
    const idleMinutes = reset.idleMinutes ?? legacyIdle;
    effective = idleMinutes === undefined ? { ...reset } : { ...reset, idleMinutes };
  } else if (legacyIdle !== undefined) {
    effective = { mode: hasTypeResets ? "daily" : "idle", atHour: 4, idleMinutes: legacyIdle };
  } else {
    effective = { ...DEFAULT_RESET_POLICY };
  }
  return { ...session, reset: effective };
}

export const SessionSchema = SessionFields.superRefine((session, ctx) => {
  // Two names with one peer id ("Alice", "alice") would silently share one DM session.
  const nameOf = new Map<string, string>();
  for (const name of Object.keys(session.identityLinks)) {
    const peerId = identityLinkPeerId(name);
    const earlier = nameOf.get(peerId);
    if (earlier === undefined) {
      nameOf.set(peerId, name);
      continue;
    }
    ctx.addIssue({
      code: "custom",
      path: ["identityLinks", name],
      message: `becomes the same peer id "${peerId}" as the name ${JSON.stringify(earlier)}: put both lists under one name`,
    });
  }
  const reset = session.reset;
  if (reset?.mode === "idle" && reset.idleMinutes === undefined && session.idleMinutes === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["reset", "idleMinutes"],
      message: 'is required when mode is "idle" (or set the legacy session.idleMinutes)',
    });
  }
}).transform(withEffectiveReset);
export type SessionConfig = z.output<typeof SessionSchema>;
export type DmScope = SessionConfig["dmScope"];
