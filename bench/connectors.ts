/**
 * Bench row 10: the gateway's CPU per inbound message on each platform's webhook path (SPEC §18)
 * beside the signed bridge's: verification, normalization, the pipeline, the run (echo model)
 * and the reply posted through the platform's API (a fake on 127.0.0.1, test/support's). One
 * gateway of its own serves all five paths; the paths take their messages in alternating blocks
 * (the host's speed drifts within a run), one message at a time to sessions the warm-up made,
 * each block ending when its replies have arrived. `telegram` streams its replies (SPEC §22,
 * `partial`, its default: the model's streaming call, a preview posted, the reply edited into
 * it) and `telegram-plain` is the same bot with `streaming: { mode: "off" }`, so the two give
 * streaming's cost per message; the preview calls per message are counted apart. Part of
 * `npm run bench`; alone: `node bench/connectors.ts [rounds=6] [block=40]`.
 */
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { groupCpuSeconds } from "../scripts/lib/proc-cpu.ts";
import { SIGNATURE_HEADER, signBody } from "../src/auth/signature.ts";
import { startFakeModel } from "../test/e2e/support/fake-model.ts";
import { startPlatformServer } from "../test/e2e/support/platform-server.ts";
import {
  discordCommand,
  discordRequest,
  type SignedRequest,
  slackEvent,
  slackRequest,
  telegramRequest,
  telegramUpdate,
  whatsappNotification,
  whatsappRequest,
} from "../test/support/platform-requests.ts";
import {
  APP_ID,
  PHONE,
  PLATFORM_SECRETS,
  platformConnectors,
  platformFakes,
  telegramBot,
} from "../test/support/platform-world.ts";

const SECRETS = {
  ...PLATFORM_SECRETS,
  GATEWAY_TOKEN: "bench-connectors-token",
  BRIDGE_SECRET: "bench-bridge-secret",
};
/** Senders per path: the warm-up makes their sessions, the blocks reuse them. */
const PEERS = 10;

export const PATHS = ["bridge", "telegram", "telegram-plain", "slack", "discord", "whatsapp"] as const;
export type PathName = (typeof PATHS)[number];

export interface ConnectorBench {
  /** workerd CPU per message, ms, by path. */
  cpu: Record<PathName, number>;
  /** Telegram calls (posts and edits: previews and the reply) per streamed message. */
  previewCallsPerMessage: number;
  /** The streamed-reply pair (a model that streams over HTTP): CPU per message, previews per message. */
  model: { cpu: Record<ModelPath, number>; previewsPerMessage: number };
  blocks: number;
  block: number;
}

/**
 * A bridge endpoint that accepts deliveries (what a bridge connector does), counting them by
 * channel, and apart from them the previews of streamed replies.
 */
async function startBridge() {
  const delivered = new Map<string, number>();
  const previews = new Map<string, number>();
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d: Buffer) => {
      raw += d.toString();
    });
    req.on("end", () => {
      const body = JSON.parse(raw) as { channel: string; kind: string };
      const counts = body.kind === "preview" ? previews : delivered;
      counts.set(body.channel, (counts.get(body.channel) ?? 0) + 1);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/deliver`,
    delivered: (channel: string) => delivered.get(channel) ?? 0,
    previews: (channel: string) => previews.get(channel) ?? 0,
    close: () => server.close(),
  };
}

/**
 * The streamed-reply pair: two bridges whose agent's model streams its answer over HTTP (a fake
 * on 127.0.0.1, MODEL_PIECES pieces MODEL_PIECE_MS apart), one with streaming off and one with
 * `partial` (previews POSTed, at most one per 250 ms), sent PEERS messages at a time.
 */
export const MODEL_PATHS = ["model-plain", "model-streamed"] as const;
type ModelPath = (typeof MODEL_PATHS)[number];
const MODEL_PIECES = 10;
const MODEL_PIECE_MS = 60;
const MODEL_REPLY = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");

export async function benchConnectorPaths(opts: {
  start: (o: LocalServerOptions) => Promise<LocalServer>;
  persistTo: string;
  log: (msg: string) => void;
  rounds?: number;
  block?: number;
}): Promise<ConnectorBench> {
  const rounds = opts.rounds ?? 6;
  const block = opts.block ?? 40;
  const { telegram, slack, discord, whatsapp } = platformFakes();
  const platforms = await startPlatformServer({
    "/telegram": telegram,
    "/slack": slack,
    "/discord": discord,
    "/graph": whatsapp,
  });
  const bridge = await startBridge();
  const model = await startFakeModel();
  model.setFallback({ text: MODEL_REPLY, stream: { pieces: MODEL_PIECES, delayMs: MODEL_PIECE_MS } });
  const server = await opts.start({
    persistTo: opts.persistTo,
    vars: SECRETS,
    config: {
      session: { dmScope: "per-channel-peer", queue: { cap: 1000 } },
      models: { providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } } },
      agents: {
        list: [
          { id: "main", default: true },
          { id: "writer", model: "fake/streaming" },
        ],
      },
      bindings: MODEL_PATHS.map((channel) => ({ agentId: "writer", match: { channel } })),
      connectors: {
        bridge: { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" },
        "model-plain": { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" },
        "model-streamed": {
          deliverUrl: bridge.url,
          secretEnv: "BRIDGE_SECRET",
          streaming: { mode: "partial" },
        },
        ...platformConnectors((p) => platforms.base(p === "whatsapp" ? "/graph" : `/${p}`)),
        "telegram-plain": {
          ...telegramBot(platforms.base("/telegram")),
          dmPolicy: "open",
          streaming: { mode: "off" },
        },
      },
    },
  });
  opts.log(
    `connector paths: gateway ${server.url} (pid ${server.pid}), platform fakes ${platforms.base("")}`,
  );

  let n = 0;
  /** One signed webhook request of a path, from peer `peer`, and where it goes. */
  const request = async (
    p: PathName | ModelPath,
    peer: number,
  ): Promise<{ path: string; req: SignedRequest }> => {
    const id = ++n;
    // Long enough (with the echo model's "echo: ") for a streamed reply to be previewed.
    const text = `hi ${id}, what will the weather be like this week?`;
    switch (p) {
      case "bridge":
      case "model-plain":
      case "model-streamed": {
        const body = JSON.stringify({ messageId: `b-${id}`, chatType: "direct", from: `peer-${peer}`, text });
        return {
          path: `/hooks/inbound/${p}`,
          req: {
            headers: {
              "content-type": "application/json",
              [SIGNATURE_HEADER]: await signBody(SECRETS.BRIDGE_SECRET, body),
            },
            body,
          },
        };
      }
      case "telegram":
        return {
          path: "/connectors/telegram",
          req: telegramRequest(telegramUpdate({ from: 100 + peer, text }), SECRETS.TELEGRAM_WEBHOOK_SECRET),
        };
      case "telegram-plain":
        return {
          path: "/connectors/telegram-plain",
          req: telegramRequest(telegramUpdate({ from: 200 + peer, text }), SECRETS.TELEGRAM_WEBHOOK_SECRET),
        };
      case "slack":
        return {
          path: "/connectors/slack",
          req: await slackRequest(
            slackEvent({ user: `U${peer}`, channel: `D${peer}`, text }),
            SECRETS.SLACK_SIGNING_SECRET,
          ),
        };
      case "discord":
        return {
          path: "/connectors/discord",
          req: await discordRequest(
            discordCommand({
              applicationId: APP_ID,
              user: `15000000000000000${peer}`,
              text,
              channelId: `13000000000000000${peer}`,
            }),
          ),
        };
      case "whatsapp":
        return {
          path: "/connectors/whatsapp",
          req: await whatsappRequest(
            whatsappNotification({ phoneNumberId: PHONE, from: `1555000${peer}`, text }),
            SECRETS.WHATSAPP_APP_SECRET,
          ),
        };
    }
  };
  // The two Telegram bots share the fake: their chats are 100-199 and 200-299. A reply is there
  // when its chat shows the whole of it (a streamed one edited into its preview, if it had one).
  const chatIn = (chat: unknown, from: number) => Number(chat) >= from && Number(chat) < from + 100;
  const telegramCalls = (from: number) =>
    telegram.calls.filter(
      (c) => /\/(sendMessage|editMessageText)$/.test(c.path) && chatIn(c.body.chat_id, from),
    ).length;
  const telegramReplies = (from: number) =>
    [...telegram.messages.values()].filter((m) => chatIn(m.chat, from) && m.text.endsWith("?")).length;
  const delivered: Record<PathName | ModelPath, () => number> = {
    bridge: () => bridge.delivered("bridge"),
    "model-plain": () => bridge.delivered("model-plain"),
    "model-streamed": () => bridge.delivered("model-streamed"),
    telegram: () => telegramReplies(100),
    "telegram-plain": () => telegramReplies(200),
    slack: () => slack.posted().length,
    discord: () => discord.posted().length,
    whatsapp: () => whatsapp.posted().length,
  };
  const send = async (p: PathName | ModelPath, peer: number) => {
    const { path, req } = await request(p, peer);
    const res = await fetch(`${server.url}${path}`, { method: "POST", headers: req.headers, body: req.body });
    await res.text();
    if (res.status !== 200 && res.status !== 202) throw new Error(`${p}: ${path} answered ${res.status}`);
  };
  const until = async (p: PathName | ModelPath, target: number) => {
    const deadline = performance.now() + 60_000;
    while (delivered[p]() < target) {
      if (performance.now() > deadline)
        throw new Error(`${p}: ${delivered[p]()} of ${target} replies after 60 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const cpuMs = Object.fromEntries([...PATHS, ...MODEL_PATHS].map((p) => [p, 0])) as Record<
    PathName | ModelPath,
    number
  >;
  let streamed = 0;
  let previewCalls = 0;
  let previews = 0;
  try {
    // Warm-up: every path's sessions exist, and the JIT has seen each path.
    for (const p of [...PATHS, ...MODEL_PATHS]) {
      const target = delivered[p]() + PEERS * 2;
      for (let i = 0; i < PEERS * 2; i++) await send(p, i % PEERS);
      await until(p, target);
    }
    for (let r = 0; r < rounds; r++) {
      // Rotate the order so no path always follows the same one.
      const order = PATHS.map((_, i) => PATHS[(i + r) % PATHS.length] as PathName);
      for (const p of order) {
        const target = delivered[p]() + block;
        const calls0 = telegramCalls(100);
        const cpu0 = groupCpuSeconds(server.pid, "workerd");
        for (let i = 0; i < block; i++) await send(p, i % PEERS);
        await until(p, target);
        cpuMs[p] += (groupCpuSeconds(server.pid, "workerd") - cpu0) * 1000;
        if (p === "telegram") {
          streamed += block;
          previewCalls += telegramCalls(100) - calls0;
        }
      }
      // The streamed-reply pair: a wave of one message to each peer at a time (each answer takes
      // the model's MODEL_PIECES × MODEL_PIECE_MS).
      for (const p of r % 2 ? [...MODEL_PATHS].reverse() : MODEL_PATHS) {
        const target = delivered[p]() + block;
        const previews0 = bridge.previews("model-streamed");
        const cpu0 = groupCpuSeconds(server.pid, "workerd");
        for (let sent = 0; sent < block; sent += PEERS) {
          const wave = Math.min(PEERS, block - sent);
          await Promise.all(Array.from({ length: wave }, (_, i) => send(p, i)));
          await until(p, target - block + sent + wave);
        }
        await until(p, target);
        cpuMs[p] += (groupCpuSeconds(server.pid, "workerd") - cpu0) * 1000;
        previews += bridge.previews("model-streamed") - previews0;
      }
      opts.log(`connector paths: round ${r + 1}/${rounds} done`);
    }
  } finally {
    await server.stop();
    await platforms.close();
    await model.close();
    bridge.close();
  }
  const total = rounds * block;
  return {
    cpu: Object.fromEntries(PATHS.map((p) => [p, cpuMs[p] / total])) as Record<PathName, number>,
    previewCallsPerMessage: streamed ? previewCalls / streamed : 0,
    model: {
      cpu: Object.fromEntries(MODEL_PATHS.map((p) => [p, cpuMs[p] / total])) as Record<ModelPath, number>,
      previewsPerMessage: previews / total,
    },
    blocks: rounds,
    block,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { scratchDir, startLocalServer } = await import("../scripts/lib/local-server.ts");
  const [rounds, block] = process.argv.slice(2).map(Number);
  const persistTo = scratchDir("switchboard-bench-connectors-");
  const result = await benchConnectorPaths({
    start: startLocalServer,
    persistTo,
    log: (m) => process.stderr.write(`[bench] ${m}\n`),
    ...(rounds ? { rounds } : {}),
    ...(block ? { block } : {}),
  });
  const bridgeCpu = result.cpu.bridge;
  console.log(`| path | workerd CPU per message | × signed bridge |\n|---|---|---|`);
  for (const p of PATHS)
    console.log(`| ${p} | ${result.cpu[p].toFixed(2)} ms | ${(result.cpu[p] / bridgeCpu).toFixed(2)} |`);
  console.log(
    `\nstreamed replies from a model streaming over HTTP: model-streamed ${result.model.cpu["model-streamed"].toFixed(2)} ms ÷ model-plain ${result.model.cpu["model-plain"].toFixed(2)} ms = ${(result.model.cpu["model-streamed"] / result.model.cpu["model-plain"]).toFixed(3)}×, ${result.model.previewsPerMessage.toFixed(2)} previews per message`,
  );
  console.log(
    `streaming (telegram ÷ telegram-plain): ${(result.cpu.telegram / result.cpu["telegram-plain"]).toFixed(3)}×, ${result.previewCallsPerMessage.toFixed(2)} Telegram calls (reply, previews, edits) per message`,
  );
  const { rmSync } = await import("node:fs");
  rmSync(persistTo, { recursive: true, force: true });
}
