/**
 * The connectors in `security.audit`: per connector its webhook (the path the gateway serves it
 * at), whether the secrets it needs are set (a platform's per account), who may write to it,
 * and the warnings about each.
 */
import { accessOf, accountIdsOf, type PlatformConnectorConfig } from "../../config/connectors";
import type { Config } from "../../config/schema";
import type { Findings } from "./findings";

/** The env secrets an account of a platform connector needs (the connector's module says). */
export type SecretNamesOf = (
  connector: PlatformConnectorConfig,
  accountId: string,
) => ReadonlyArray<{ env: string; path: string; required: boolean }>;

export function auditConnectors(
  config: Config,
  found: Findings,
  secretNamesOf: SecretNamesOf,
  webhookOf: (channel: string) => string,
) {
  return Object.entries(config.connectors).map(([channel, c]) => {
    const access = accessOf(c);
    const webhook = webhookOf(channel);
    if (access.dmPolicy === "open" && c.type !== "webhook") {
      found.warn({
        id: "connector-open",
        severity: "medium",
        setting: `connectors.${channel}.dmPolicy`,
        message: `connector "${channel}" answers anyone who writes to the bot (dmPolicy "open"): every message is a model call; "pairing" lets an operator approve each sender`,
      });
    }
    if (c.type !== "webhook") {
      const accounts = accountIdsOf(c) ?? [];
      const secrets = accounts.flatMap((accountId) =>
        secretNamesOf(c, accountId).map((n) => {
          const set = found.isSet(n.env);
          const setting = `connectors.${channel}.${n.path}`;
          found.secret(
            {
              name: n.env,
              purpose: `connector "${channel}" (${c.type}, account ${accountId}): ${n.path}`,
              set,
              required: n.required,
            },
            setting,
          );
          if (!set && n.required) {
            found.warn({
              id: "connector-secret-missing",
              severity: "medium",
              setting,
              message: `${n.env} is not set: ${webhook} answers 503 until it is (wrangler secret put ${n.env})`,
            });
          }
          return { name: n.env, accountId, set, required: n.required };
        }),
      );
      return {
        channel,
        type: c.type,
        webhook,
        secretSet: secrets.every((x) => x.set || !x.required),
        secrets,
        accounts,
        access,
      };
    }
    const secretSet = found.isSet(c.secretEnv);
    found.secret(
      {
        name: c.secretEnv,
        purpose: `connector "${channel}": inbound signatures and signed deliveries`,
        set: secretSet,
        required: true,
      },
      `connectors.${channel}.secretEnv`,
    );
    if (!secretSet) {
      found.warn({
        id: "connector-secret-missing",
        severity: "medium",
        setting: `connectors.${channel}.secretEnv`,
        message: `${c.secretEnv} is not set: ${webhook} answers 503 and replies to it cannot be signed`,
      });
    }
    if (!c.deliverUrl) {
      found.warn({
        id: "connector-no-deliver-url",
        severity: "low",
        setting: `connectors.${channel}.deliverUrl`,
        message: `connector "${channel}" has no deliverUrl: replies to it end dead; set the bridge's delivery URL`,
      });
    }
    return {
      channel,
      type: c.type,
      webhook,
      secretEnv: c.secretEnv,
      secretSet,
      secrets: [{ name: c.secretEnv, accountId: "*", set: secretSet, required: true }],
      deliverUrl: !!c.deliverUrl,
      ...(c.accounts ? { accounts: c.accounts } : {}),
      access,
    };
  });
}

export type AuditedConnector = ReturnType<typeof auditConnectors>[number];
