/**
 * The `storage` section of the config (SPEC §19): the D1 bindings sessions are spread over.
 * Which database holds which session is db/placement.ts's; this only validates the list.
 */
import { z } from "zod";

/** A D1 binding's name, as wrangler.toml's `[[d1_databases]] binding` spells it. */
export const BindingName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]*$/,
    "must be a binding name (letters, digits, _; not starting with a digit)",
  );

/** SPEC §19: the D1 databases sessions are spread over, by a stable hash of each session's key. */
export const StorageSchema = z.strictObject({
  d1: z
    .array(BindingName)
    .min(1)
    .max(256)
    .default(() => ["DB"])
    .superRefine((names, ctx) => {
      names.forEach((name, i) => {
        const first = names.indexOf(name);
        if (first !== i)
          ctx.addIssue({
            code: "custom",
            path: [i],
            message: `duplicate binding "${name}" (already storage.d1[${first}])`,
          });
      });
    }),
});
export type StorageConfig = z.output<typeof StorageSchema>;
