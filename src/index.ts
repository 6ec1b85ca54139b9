import { DurableObject } from "cloudflare:workers";

export class SessionActor extends DurableObject<Env> {}

export default {
  async fetch() {
    return new Response("starting", { status: 503 });
  },
} satisfies ExportedHandler<Env>;
