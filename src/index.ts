/** Worker entry: the HTTP app, the cron handler and the SessionActor Durable Object class. */
import { runScheduled } from "./cron/scheduled";
import { app } from "./http/app";

export { SessionActor } from "./session/actor";

export default {
  fetch: app.fetch,
  async scheduled(controller, env, ctx) {
    ctx.waitUntil(runScheduled(controller, env));
  },
} satisfies ExportedHandler<Env>;
