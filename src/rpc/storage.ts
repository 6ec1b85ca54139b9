/**
 * Operator RPC methods on storage over several D1 databases (SPEC §19): `storage.rebalance`,
 * one bounded, resumable step of moving the sessions whose database changed with `storage.d1`
 * (the CLI calls it until it is done), and `storage.verify`, which checks the placement and,
 * when it holds, records the list so the gateway serves again. Both answer while the gateway
 * refuses everything else (http/app.ts).
 */
import { z } from "zod";
import { StorageBindingError } from "../db/placement";
import { DEFAULT_LIMIT, MAX_LIMIT, rebalance } from "../db/rebalance";
import { RebalanceRefusedError } from "../db/rebalance-plan";
import { verifyPlacement } from "../db/rebalance-verify";
import { ApiError } from "../http/errors";
import { type Method, method } from "./method";

/** The db layer's refusals as the HTTP errors they are: a bad request, or a deployment to fix first. */
async function answering<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof RebalanceRefusedError) {
      throw new ApiError(error.kind === "input" ? "INVALID_REQUEST" : "CONFLICT", error.message);
    }
    if (error instanceof StorageBindingError) throw new ApiError("CONFLICT", error.message);
    throw error;
  }
}

const between = `must be a whole number between 1 and ${MAX_LIMIT}`;

export const STORAGE_METHODS: Record<string, Method> = {
  "storage.rebalance": method(
    z.strictObject({
      limit: z
        .number()
        .int()
        .min(1, { error: (i) => `${between} (got ${i.input})` })
        .max(MAX_LIMIT, { error: (i) => `${between} (got ${i.input})` })
        .optional(),
      cursor: z.string().min(1).optional(),
      dryRun: z.boolean().optional(),
    }),
    async (p, { env }) =>
      answering(() =>
        rebalance(env, {
          limit: p.limit ?? DEFAULT_LIMIT,
          cursor: p.cursor,
          dryRun: p.dryRun,
          now: Date.now(),
        }),
      ),
  ),

  "storage.verify": method(z.strictObject({}), async (_p, { env }) =>
    answering(() => verifyPlacement(env, Date.now())),
  ),
};
