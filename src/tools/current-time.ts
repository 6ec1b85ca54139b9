/** `current_time`: a harmless built-in, the current time in the gateway's timezone. */
import { z } from "zod";
import { defineTool } from "./types";

export const currentTimeTool = defineTool({
  name: "current_time",
  description: "Returns the current date and time (ISO 8601, epoch ms) in the gateway's configured timezone.",
  schema: z.strictObject({}),
  async execute(_input, ctx) {
    const now = new Date();
    const timeZone = ctx.config.session.timezone;
    return {
      iso: now.toISOString(),
      epochMs: now.getTime(),
      timezone: timeZone,
      local: now.toLocaleString("en-GB", { timeZone, hour12: false }),
    };
  },
});
