/**
 * The model providers in `security.audit`: the providers the config's model references reach,
 * which settings reference each, whether its API key is set, and a warning for a reference that
 * resolves to no provider and for a key that is needed and not set.
 */
import type { Config } from "../../config/schema";
import type { Findings } from "./findings";

/** The provider a model reference runs on; throws, saying why, for one that resolves to none. */
export type ProviderOf = (ref: string) => { name: string; api: string; apiKeyEnv?: string | undefined };

interface ProviderUse {
  name: string;
  api: string;
  apiKeyEnv?: string;
  usedBy: string[];
}

/** The providers the config's model references reach, and which settings reference them. */
function providersInUse(config: Config, found: Findings, providerOf: ProviderOf): ProviderUse[] {
  const refs: Array<[setting: string, ref: string]> = [
    ["agents.defaults.model", config.agents.defaults.model],
  ];
  config.agents.list.forEach((a, i) => {
    if (a.model) refs.push([`agents.list[${i}].model (${a.id})`, a.model]);
  });
  for (const [alias, ref] of Object.entries(config.models.aliases))
    refs.push([`models.aliases.${alias}`, ref]);
  const used = new Map<string, ProviderUse>();
  for (const [setting, ref] of refs) {
    try {
      const provider = providerOf(ref);
      const entry = used.get(provider.name) ?? {
        name: provider.name,
        api: provider.api,
        ...(provider.apiKeyEnv ? { apiKeyEnv: provider.apiKeyEnv } : {}),
        usedBy: [],
      };
      entry.usedBy.push(setting);
      used.set(provider.name, entry);
    } catch (error) {
      found.warn({
        id: "model-unknown",
        severity: "high",
        setting,
        message: `${error instanceof Error ? error.message : String(error)}; runs using it fail`,
      });
    }
  }
  return [...used.values()];
}

export function auditProviders(config: Config, found: Findings, providerOf: ProviderOf) {
  return providersInUse(config, found, providerOf).map((p) => {
    const keySet = p.apiKeyEnv ? found.isSet(p.apiKeyEnv) : true;
    // openai-compatible servers (vLLM, Ollama) may need no key; the others do.
    const required = !!p.apiKeyEnv && p.api !== "openai-compatible";
    if (p.apiKeyEnv)
      found.secret({ name: p.apiKeyEnv, purpose: `model provider "${p.name}"`, set: keySet, required });
    if (p.apiKeyEnv && !keySet && required) {
      found.warn({
        id: "provider-key-missing",
        severity: "high",
        setting: p.usedBy[0] ?? `models.providers.${p.name}`,
        message: `provider "${p.name}" needs ${p.apiKeyEnv}, which is not set: runs of ${p.usedBy.join(", ")} fail (wrangler secret put ${p.apiKeyEnv})`,
      });
    }
    return {
      name: p.name,
      api: p.api,
      ...(p.apiKeyEnv ? { apiKeyEnv: p.apiKeyEnv } : {}),
      keySet,
      usedBy: p.usedBy,
    };
  });
}
