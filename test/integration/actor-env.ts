/**
 * What a test gives one SessionActor instance instead of the runtime's env: another config,
 * other vars or bindings, D1 databases seen through a fault or observation layer. The test entry
 * (entry.ts) asks `envOf` for its actors' env on every read, so nothing reaches into an actor;
 * a test calls `changeActorEnv` (test/integration/support.ts) and the instance it finds alive
 * sees the change from its next read of `env` on. A change lasts as long as that instance: the
 * next one (after `abortAllDurableObjects`, a simulated crash) starts from the runtime's env, as
 * a restarted process would, until a test changes it again.
 *
 * This module imports nothing from `cloudflare:test`: the entry runs it in the actors' code.
 */
import { loadConfig } from "../../src/config/load";
import { bindingOf } from "../../src/db/placement";

export interface ActorEnvChange {
  /** SWITCHBOARD_CONFIG's text (see configText in ./support.ts). */
  config?: string;
  /** Vars and bindings to set; a name set to undefined is removed. */
  vars?: Record<string, unknown>;
  /**
   * Each D1 database of storage.d1 (of the changed config), by binding name, as `wrap` returns
   * it: a fault injected or a call counted this way holds whichever database a session lives in.
   */
  databases?: (db: D1Database, name: string) => D1Database;
}

interface Registered {
  change: ActorEnvChange;
  /** The env made of the change, once, so the actor meets the same objects on every read. */
  env?: Env;
}

const changes = new WeakMap<object, Registered>();

/** Gives `instance` (an actor alive now) the env `change` makes of the runtime's; replaces an earlier change. */
export function setActorEnv(instance: object, change: ActorEnvChange): void {
  changes.set(instance, { change });
}

/** The env `instance` sees: the runtime's `env`, or what the test's change made of it. */
export function envOf(instance: object, env: Env): Env {
  const registered = changes.get(instance);
  if (!registered) return env;
  registered.env ??= changedEnv(env, registered.change);
  return registered.env;
}

function changedEnv(env: Env, change: ActorEnvChange): Env {
  const changed: Record<string, unknown> = { ...env };
  if (change.config !== undefined) changed.SWITCHBOARD_CONFIG = change.config;
  for (const [name, value] of Object.entries(change.vars ?? {})) {
    if (value === undefined) delete changed[name];
    else changed[name] = value;
  }
  const wrap = change.databases;
  if (wrap) {
    // Names from the config, not from placement: that caches the databases by env object, and
    // this one must be placed with the wrapped ones.
    for (const name of loadConfig(changed as unknown as Env).storage.d1) {
      changed[name] = wrap(bindingOf(changed, name), name);
    }
  }
  return changed as unknown as Env;
}
