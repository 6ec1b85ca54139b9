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
  blocks: number;
  block: number;
}

/** A bridge endpoint that accepts and counts deliveries (what a bridge connector does). */
async function startBridge() {
  let delivered = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      delivered++;
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/deliver`, delivered: () => delivered, close: () => server.close() };
}

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
  const server = await opts.start({
    persistTo: opts.persistTo,
    vars: SECRETS,
    config: {
      session: { dmScope: "per-channel-peer", queue: { cap: 1000 } },
      connectors: {
        bridge: { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" },
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
  const request = async (p: PathName, peer: number): Promise<{ path: string; req: SignedRequest }> => {
    const id = ++n;
    // Long enough (with the echo model's "echo: ") for a streamed reply to be previewed.
    const text = `hi ${id}, what will the weather be like this week?`;
    switch (p) {
      case "bridge": {
        const body = JSON.stringify({ messageId: `b-${id}`, chatType: "direct", from: `peer-${peer}`, text });
        return {
          path: "/hooks/inbound/bridge",
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
  const delivered: Record<PathName, () => number> = {
    bridge: bridge.delivered,
    telegram: () => telegramReplies(100),
    "telegram-plain": () => telegramReplies(200),
    slack: () => slack.posted().length,
    discord: () => discord.posted().length,
    whatsapp: () => whatsapp.posted().length,
  };
  const send = async (p: PathName, peer: number) => {
    const { path, req } = await request(p, peer);
    const res = await fetch(`${server.url}${path}`, { method: "POST", headers: req.headers, body: req.body });
    await res.text();
    if (res.status !== 200 && res.status !== 202) throw new Error(`${p}: ${path} answered ${res.status}`);
  };
  const until = async (p: PathName, target: number) => {
    const deadline = performance.now() + 60_000;
    while (delivered[p]() < target) {
      if (performance.now() > deadline)
        throw new Error(`${p}: ${delivered[p]()} of ${target} replies after 60 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const cpuMs = Object.fromEntries(PATHS.map((p) => [p, 0])) as Record<PathName, number>;
  let streamed = 0;
  let previewCalls = 0;
  try {
    // Warm-up: every path's sessions exist, and the JIT has seen each path.
    for (const p of PATHS) {
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
      opts.log(`connector paths: round ${r + 1}/${rounds} done`);
    }
  } finally {
    await server.stop();
    await platforms.close();
    bridge.close();
  }
  const total = rounds * block;
  return {
    cpu: Object.fromEntries(PATHS.map((p) => [p, cpuMs[p] / total])) as Record<PathName, number>,
    previewCallsPerMessage: streamed ? previewCalls / streamed : 0,
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
    `\nstreaming (telegram ÷ telegram-plain): ${(result.cpu.telegram / result.cpu["telegram-plain"]).toFixed(3)}×, ${result.previewCallsPerMessage.toFixed(2)} Telegram calls (reply, previews, edits) per message`,
  );
  const { rmSync } = await import("node:fs");
  rmSync(persistTo, { recursive: true, force: true });
}
