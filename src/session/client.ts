/** Worker-side helpers for talking to SessionActors. */
import { ApiError } from "../http/errors";
import type { ActorError } from "./types";

export function actorError(e: ActorError): ApiError {
  return new ApiError(e.code, e.message);
}

export function actorFor(env: Env, sessionKey: string) {
  return env.SESSION_ACTOR.getByName(sessionKey);
}

export function isActorError(value: unknown): value is ActorError {
  return typeof value === "object" && value !== null && (value as { ok?: unknown }).ok === false;
}
