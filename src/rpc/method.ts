/**
 * The shape of an operator RPC method (SPEC §13, §17 "RPC parameters"): a strict zod schema for
 * its params (unknown params are a 400) and a function from params to payload; plus the
 * argument helpers the methods share.
 */
import { z } from "zod";
import type { Config } from "../config/schema";
import { getSession, type SessionRow } from "../db/queries";
import { ApiError } from "../http/errors";
import { canonicalizeSessionKey } from "../keys/session-key";

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

export function canonicalKey(raw: string, config: Config): string {
  try {
    return canonicalizeSessionKey(raw, config.session);
  } catch (error) {
    throw new ApiError("INVALID_REQUEST", `\`key\`: ${error instanceof Error ? error.message : error}`);
  }
}

export async function requireSession(env: Env, config: Config, raw: string): Promise<SessionRow> {
  const row = await getSession(env, canonicalKey(raw, config));
  if (!row) throw new ApiError("NOT_FOUND", `session not found: ${raw}`);
  return row;
}

/** The row without its null fields, so payloads show what is set. */
export function withoutNulls(row: object): Record<string, unknown> {
  const view: Record<string, unknown> = { ...row };
  for (const k of Object.keys(view)) if (view[k] === null) delete view[k];
  return view;
}
