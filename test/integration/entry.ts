/**
 * The Worker the workerd tests run (vitest.config.ts, `main` of the workers projects): the
 * gateway of src/index.ts unchanged, whose SessionActor sees its env through `envOf`
 * (./actor-env.ts): the runtime's env, unless a test gave that instance another one
 * (`changeActorEnv` in ./support.ts). Under @cloudflare/vitest-plugin the actors run in the
 * tests' isolate and module graph, so the registry the test writes is the one read here.
 * Never deployed.
 */
import gateway, { SessionActor as GatewaySessionActor } from "../../src/index";
import { envOf } from "./actor-env";

export default gateway;

export class SessionActor extends GatewaySessionActor {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // The actor reads `this.env` on every access (never a copy kept from its constructor):
    // each read asks the registry, so a change made while the instance lives holds from then
    // on, with new binding objects (the gateway caches statements and placements by them).
    Object.defineProperty(this, "env", {
      configurable: true,
      enumerable: true,
      get: () => envOf(this, env),
    });
  }
}
