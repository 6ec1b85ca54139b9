/**
 * The shape of an operator RPC method (SPEC §13, §17 "RPC parameters"): a strict zod schema for
 * its params (unknown params are a 400) and a function from params to payload; plus the
 * argument helpers the methods share.
 */
import { z } from "zod";
import type { Config } from "../config/schema";
import { findSession, type SessionRow } from "../db/queries";
import { ApiError } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import { canonicalizeSessionKey, storedKeyForms } from "../keys/canonical-key";

export interface RpcContext {
  env: Env;
  config: Config;
}

export type Method = { params: z.ZodType; run(params: never, ctx: RpcContext): Promise<unknown> };

export function method<S extends z.ZodType>(
  params: S,
  run: (p: z.output<S>, ctx: RpcContext) => Promise<unknown>,
): Method {
  return { params, run: run as Method["run"] };
}

export const Key = z.string().trim().min(1).max(512);

/**
 * A key argument, canonical. The operator acts for the default agent: `main` (and a legacy key
 * without an agent) means its sessions (SPEC §2).
 */
export function canonicalKey(raw: string, config: Config): string {
  try {
    return canonicalizeSessionKey(raw, config.session, defaultAgentId(config.agents.list));
  } catch (error) {
    throw new ApiError("INVALID_REQUEST", `\`key\`: ${error instanceof Error ? error.message : error}`);
  }
}

/** The stored session a key argument names, in any case (`storedKeyForms`), or a 404. */
export async function requireSession(env: Env, config: Config, raw: string): Promise<SessionRow> {
  const row = await findSession(env, storedKeyForms(canonicalKey(raw, config)));
  if (!row) throw new ApiError("NOT_FOUND", `session not found: ${raw}`);
  return row;
}

/** The row without its null fields, so payloads show what is set. */
export function withoutNulls(row: object): Record<string, unknown> {
  const view: Record<string, unknown> = { ...row };
  for (const k of Object.keys(view)) if (view[k] === null) delete view[k];
  return view;
}
