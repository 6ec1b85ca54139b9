/** Worker entry: the HTTP app, the cron handler and the SessionActor Durable Object class. */
import { runScheduled } from "./cron/scheduled";
import { app } from "./http/app";

export { SessionActor } from "./session/actor";

export default {
  fetch: app.fetch,
  // Awaited rather than handed to waitUntil: the invocation lasts as long as its maintenance,
  // so overlapping triggers are visible as such and `/__scheduled` answers when the work is done.
  async scheduled(controller, env) {
    await runScheduled(controller, env);
  },
} satisfies ExportedHandler<Env>;
