/**
 * The model a person names in a word, as in `/new sonnet` or `/new gpt-4.1` (SPEC §10: "alias,
 * `provider/model`, or a fuzzy provider/model name"). Pure: the config and the catalogs only.
 *
 * First the exact reference (`resolveModelRef`: an alias or `provider/model`); else the known
 * models (alias targets, the agents' models, `models.catalog`, and the built-in catalog for every
 * configured provider of its api) whose model id is the word; else those whose id holds the
 * word's parts in order (`sonnet` is `claude-sonnet-4`, `opus` is `claude-opus-4-5`). Each step
 * needs exactly one model: an ambiguous word (`mini`) or an unknown one names no model.
 */
import type { Config } from "../config/schema";
import { BUILT_IN_CATALOG, SUPERSEDED } from "./catalog";
import { providerSpecs, resolveModelRef } from "./models";

const PARTS = /[-_./:\s]+/;

function partsOf(id: string): string[] {
  return id.toLowerCase().split(PARTS).filter(Boolean);
}

function holdsInOrder(parts: readonly string[], word: readonly string[]): boolean {
  for (let i = 0; i + word.length <= parts.length; i++) {
    if (word.every((w, j) => parts[i + j] === w)) return true;
  }
  return false;
}

/** Every `provider/model` the config knows by name. */
function knownModels(config: Config): string[] {
  const refs = new Set<string>();
  const add = (ref: string | undefined) => {
    if (!ref) return;
    try {
      refs.add(resolveModelRef(ref, config).ref);
    } catch {
      // A reference that does not resolve is nobody's model.
    }
  };
  for (const target of Object.values(config.models.aliases)) add(target);
  add(config.agents.defaults.model);
  for (const agent of config.agents.list) add(agent.model);
  for (const ref of Object.keys(config.models.catalog)) add(ref);
  const specs = providerSpecs(config);
  for (const key of Object.keys(BUILT_IN_CATALOG)) {
    const slash = key.indexOf("/");
    const api = key.slice(0, slash);
    const model = key.slice(slash + 1);
    if (model === "*" || SUPERSEDED.has(key)) continue;
    for (const [provider, spec] of Object.entries(specs)) if (spec.api === api) add(`${provider}/${model}`);
  }
  return [...refs];
}

function only(refs: readonly string[]): string | undefined {
  return refs.length === 1 ? refs[0] : undefined;
}

/** The canonical `provider/model` the word names, or undefined (no model, or more than one). */
export function matchModelWord(word: string, config: Config): string | undefined {
  const trimmed = word.trim();
  if (!trimmed) return undefined;
  try {
    return resolveModelRef(trimmed, config).ref;
  } catch {
    // Not an exact reference: look for it among the known models.
  }
  const lowered = trimmed.toLowerCase();
  const known = knownModels(config);
  const modelId = (ref: string) => ref.slice(ref.indexOf("/") + 1).toLowerCase();
  const exact = known.filter((ref) => modelId(ref) === lowered);
  if (exact.length) return only(exact);
  const word_ = partsOf(lowered);
  if (!word_.length) return undefined;
  return only(known.filter((ref) => holdsInOrder(partsOf(modelId(ref)), word_)));
}
