/**
 * Operator RPC (`POST /rpc/:method`, SPEC §13 and §17 "RPC parameters"): every method by name.
 * Each declares a strict zod schema for its params (unknown params are a 400) and returns the
 * payload; the methods live with their resource (gateway.ts, sessions.ts, runs.ts, connectors.ts,
 * storage.ts, usage.ts).
 */
import { ownEntry } from "../config/lookup";
import { ApiError, parseInput } from "../http/errors";
import { CONNECTOR_METHODS } from "./connectors";
import { GATEWAY_METHODS } from "./gateway";
import type { Method, RpcContext } from "./method";
import { RUN_METHODS } from "./runs";
import { SESSION_METHODS } from "./sessions";
import { STORAGE_METHODS } from "./storage";
import { USAGE_METHODS } from "./usage";

export type { RpcContext };

export const METHODS: Record<string, Method> = {
  ...GATEWAY_METHODS,
  ...SESSION_METHODS,
  ...RUN_METHODS,
  ...CONNECTOR_METHODS,
  ...STORAGE_METHODS,
  ...USAGE_METHODS,
};

export async function callMethod(name: string, rawParams: unknown, ctx: RpcContext): Promise<unknown> {
  const m = ownEntry(METHODS, name);
  if (!m) {
    throw new ApiError("NOT_FOUND", `unknown method "${name}" (methods: ${Object.keys(METHODS).join(", ")})`);
  }
  const params = parseInput(m.params, rawParams);
  return m.run(params as never, ctx);
}
