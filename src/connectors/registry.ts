/**
 * The platform connectors by type (SPEC §18), and what every caller asks of one: its module, an
 * account's fields and secrets, and which required secrets are missing. A new platform is a
 * module and a line here.
 */
import { accountOf, type PlatformConnectorConfig, type PlatformType } from "../config/connectors";
import { discord } from "./discord";
import { slack } from "./slack";
import { telegram } from "./telegram";
import type { Account, PlatformConnector, Secrets } from "./types";
import { whatsapp } from "./whatsapp";

const CONNECTORS: { [T in PlatformType]: PlatformConnector<Extract<PlatformConnectorConfig, { type: T }>> } =
  {
    telegram,
    slack,
    discord,
    whatsapp,
  };

/** The module of a platform connector's config. */
export function platformOf(c: PlatformConnectorConfig): PlatformConnector {
  return CONNECTORS[c.type] as unknown as PlatformConnector;
}

/** An account of a connector with its module and secret values, or undefined for an unknown account. */
export function accountWith(c: PlatformConnectorConfig, accountId: string, env: Env) {
  const account = accountOf(c, accountId) as Account | undefined;
  if (!account) return undefined;
  const module = platformOf(c);
  const vars = env as unknown as Record<string, unknown>;
  const secrets: Record<string, string | undefined> = {};
  for (const { env: name } of module.secretNames(account)) {
    const v = vars[name];
    secrets[name] = typeof v === "string" && v ? v : undefined;
  }
  const missing = module.secretNames(account).filter((s) => s.required && !secrets[s.env]);
  return { module, account, secrets: secrets as Secrets, missing };
}
