/** Reaching SessionActors from outside them: the actor of a key, and the session port tools use. */
import type { ActorError } from "../runs/types";
import type { SessionPort } from "../tools/types";

export function actorFor(env: Env, sessionKey: string) {
  return env.SESSION_ACTOR.getByName(sessionKey);
}

export function isActorError(value: unknown): value is ActorError {
  return typeof value === "object" && value !== null && (value as { ok?: unknown }).ok === false;
}

/** Tools' access to sessions: each call goes to the target key's actor. */
export function actorSessions(env: Env): SessionPort {
  return {
    enqueue: (req) => actorFor(env, req.sessionKey).enqueue(req),
    waitForRun: (sessionKey, runId, timeoutMs) =>
      actorFor(env, sessionKey).waitForRun(sessionKey, runId, timeoutMs),
    queueDepth: (sessionKey) => actorFor(env, sessionKey).queueDepth(sessionKey),
    stateChanges: (sessionKey, since) => actorFor(env, sessionKey).stateChanges(sessionKey, since),
    note: (sessionKey, message) => actorFor(env, sessionKey).note(sessionKey, message),
    runInput: (sessionKey, runId) => actorFor(env, sessionKey).runInput(sessionKey, runId),
    abort: (sessionKey, clearQueue) => actorFor(env, sessionKey).abort(sessionKey, clearQueue),
  };
}
