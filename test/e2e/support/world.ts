/**
 * A gateway wired to a fake connector and a fake OpenAI-compatible model (provider `fake`),
 * for suites that need all three. Start in `beforeAll`, `dispose()` in `afterAll`.
 */
import { type FakeConnector, startFakeConnector } from "./fake-connector.ts";
import { type FakeModel, startFakeModel } from "./fake-model.ts";
import { CONNECTOR_SECRET, connectorConfig, type Gateway, startGateway } from "./gateway.ts";

export interface World {
  /** Replace it when a test restarts the gateway, so `dispose()` stops the one running. */
  gw: Gateway;
  connector: FakeConnector;
  model: FakeModel;
  dispose(): Promise<void>;
}

export interface WorldConfig {
  /** `models.retry`; the fake provider is added next to it. */
  retry: { attempts: number; baseDelayMs: number };
  /** `models.pricing` (SPEC §21): US dollars per million tokens, by model ref. */
  pricing?: Record<string, { input: number; output: number; cacheRead?: number; cacheWrite?: number }>;
  agents: Record<string, unknown>;
  delivery: Record<string, unknown>;
  /** More top-level config sections (e.g. `cron`). */
  extra?: Record<string, unknown>;
  /** The connectors, given the fake connector's URL (default: the bridge of `connectorConfig`). */
  connectors?: (deliverUrl: string) => Record<string, unknown>;
  /** Secrets and vars beside the gateway's own (a platform connector's). */
  vars?: Record<string, string>;
}

export async function startWorld(cfg: WorldConfig): Promise<World> {
  const [connector, model] = await Promise.all([startFakeConnector(CONNECTOR_SECRET), startFakeModel()]);
  const gw = await startGateway({
    ...(cfg.vars ? { vars: cfg.vars } : {}),
    config: {
      connectors: (cfg.connectors ?? connectorConfig)(connector.url),
      session: { dmScope: "per-channel-peer" },
      models: {
        providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } },
        retry: cfg.retry,
        ...(cfg.pricing ? { pricing: cfg.pricing } : {}),
      },
      agents: cfg.agents,
      delivery: cfg.delivery,
      ...cfg.extra,
    },
  });
  const world: World = {
    gw,
    connector,
    model,
    async dispose() {
      await world.gw.dispose();
      await Promise.all([connector.close(), model.close()]);
    },
  };
  return world;
}
