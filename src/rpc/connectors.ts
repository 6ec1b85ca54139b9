/**
 * Operator RPC methods for chat connectors (SPEC §18): pairing (`pairing.approve`,
 * `pairing.list`, `pairing.revoke`) and each platform's setup and check (`connectors.setup`
 * registers the webhook where the platform has an API for it, `connectors.check` asks the
 * platform who the bot is). The gateway holds the secrets, so these run here, not in the CLI.
 */
import { z } from "zod";
import { accountIdsOf, type PlatformConnectorConfig } from "../config/connectors";
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";
import { accountWith } from "../connectors/registry";
import { approvePairingCode, listPairing, revokePairedSender } from "../db/pairing";
import { ApiError } from "../http/errors";
import { pathOf, SURFACE } from "../http/surface";
import { normalizeChannel } from "../keys/ids";
import { Key, type Method, method } from "./method";

const Channel = z.string().trim().min(1).max(64);

/**
 * The configured connector a `channel` argument names, or an error (404 for a lookup, 400 where
 * the channel is a field of something else) naming the configured ones.
 */
export function connectorOf(
  config: Config,
  given: string,
  code: "NOT_FOUND" | "INVALID_REQUEST" = "NOT_FOUND",
) {
  const channel = normalizeChannel(given);
  const connector = ownEntry(config.connectors, channel);
  if (!connector) {
    const known = Object.keys(config.connectors);
    throw new ApiError(
      code,
      `\`channel\` "${given}" has no connector (${known.length ? `configured: ${known.join(", ")}` : "none are configured"})`,
    );
  }
  return { channel, connector };
}

function platformConnector(
  config: Config,
  given: string,
): { channel: string; connector: PlatformConnectorConfig } {
  const { channel, connector } = connectorOf(config, given);
  if (connector.type === "webhook") {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`channel\` "${channel}" is a signed bridge: it has no platform to set up or check`,
    );
  }
  return { channel, connector };
}

/** One report per account of a platform connector. */
async function perAccount(
  env: Env,
  channel: string,
  connector: PlatformConnectorConfig,
  run: (
    found: NonNullable<ReturnType<typeof accountWith>>,
    accountId: string,
  ) => Promise<{ ok: boolean; detail: string }>,
) {
  const reports = [];
  for (const accountId of accountIdsOf(connector) ?? []) {
    const found = accountWith(connector, accountId, env);
    if (!found) continue;
    if (found.missing.length) {
      reports.push({
        channel,
        type: connector.type,
        accountId,
        ok: false,
        detail: `not set: ${found.missing.map((m) => `${m.env} (connectors.${channel}.${m.path})`).join(", ")}`,
      });
      continue;
    }
    reports.push({ channel, type: connector.type, accountId, ...(await run(found, accountId)) });
  }
  return reports;
}

export const CONNECTOR_METHODS: Record<string, Method> = {
  "pairing.approve": method(
    z.strictObject({ channel: Channel, code: z.string().trim().min(1).max(32) }),
    async (p, { env, config }) => {
      const { channel } = connectorOf(config, p.channel);
      const approved = await approvePairingCode(env, channel, p.code.toUpperCase(), Date.now());
      if (!approved) {
        throw new ApiError(
          "NOT_FOUND",
          `no pending pairing code "${p.code}" on ${channel} (unknown, used or expired)`,
        );
      }
      return { channel, peerId: approved.peerId, accountId: approved.accountId, approved: true };
    },
  ),

  "pairing.list": method(z.strictObject({ channel: Channel.optional() }), async (p, { env, config }) => {
    const channel = p.channel ? connectorOf(config, p.channel).channel : undefined;
    return listPairing(env, channel, Date.now());
  }),

  "pairing.revoke": method(z.strictObject({ channel: Channel, peerId: Key }), async (p, { env, config }) => {
    const { channel } = connectorOf(config, p.channel);
    return { channel, peerId: p.peerId, revoked: await revokePairedSender(env, channel, p.peerId) };
  }),

  "connectors.setup": method(
    z.strictObject({ channel: Channel, url: z.url({ protocol: /^https?$/ }) }),
    async (p, { env, config }) => {
      const { channel, connector } = platformConnector(config, p.channel);
      const base = p.url.replace(/\/+$/, "");
      const reports = await perAccount(env, channel, connector, (found, accountId) => {
        // The connector's own account is served without an account id.
        const path = pathOf(SURFACE.platform, {
          channel,
          accountId: accountId === connector.accountId ? undefined : accountId,
        });
        return found.module.setup(`${base}${path}`, found.account, found.secrets);
      });
      return { ok: reports.every((r) => r.ok), reports };
    },
  ),

  "connectors.check": method(z.strictObject({ channel: Channel.optional() }), async (p, { env, config }) => {
    const channels = p.channel
      ? [platformConnector(config, p.channel)]
      : Object.entries(config.connectors)
          .filter((e): e is [string, PlatformConnectorConfig] => e[1].type !== "webhook")
          .map(([channel, connector]) => ({ channel, connector }));
    const reports = (
      await Promise.all(
        channels.map(({ channel, connector }) =>
          perAccount(env, channel, connector, (found) => found.module.check(found.account, found.secrets)),
        ),
      )
    ).flat();
    return { ok: reports.every((r) => r.ok), reports };
  }),
};
