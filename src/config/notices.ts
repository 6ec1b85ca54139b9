/**
 * What a valid config holds that Switchboard accepts and does not act on: settings an OpenClaw
 * config commonly carries, so that such a config loads as it is. The `status` RPC shows them, so
 * an operator knows a setting is not in effect. Pure.
 */
import type { Config } from "./schema";

export function ignoredSettings(config: Config): string[] {
  const ignored: string[] = [];
  if (config.session.store !== undefined) {
    ignored.push(
      "config.session.store: ignored; Switchboard keeps the session index and transcripts in D1, not in a store file",
    );
  }
  return ignored;
}
