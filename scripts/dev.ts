/**
 * `npm run dev`: creates .dev.vars from the example when absent, applies local D1 migrations,
 * serves the gateway on http://127.0.0.1:8787 (echo model, dev token), runs a console "dev"
 * connector on :8788 that prints every delivery, and prints the dashboard's URL and
 * ready-to-paste curl examples.
 */
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { startLocalServer } from "./lib/local-server.ts";

const root = path.resolve(import.meta.dirname, "..");
const devVars = path.join(root, ".dev.vars");
if (!existsSync(devVars)) {
  copyFileSync(path.join(root, ".dev.vars.example"), devVars);
  console.log("[switchboard] created .dev.vars from .dev.vars.example");
}
const vars = Object.fromEntries(
  readFileSync(devVars, "utf8")
    .split("\n")
    .filter((l) => /^[A-Z_][A-Z0-9_]*=/.test(l))
    .map((l) => {
      const eq = l.indexOf("=");
      return [l.slice(0, eq), l.slice(eq + 1).replace(/^(['"])(.*)\1$/, "$2")];
    }),
) as Record<string, string>;
const token = vars.GATEWAY_TOKEN ?? "dev-token";
const connectorSecret = vars.DEV_CONNECTOR_SECRET ?? "dev-connector-secret";
const hooksToken = vars.HOOKS_TOKEN ?? "dev-hooks-token";

const printer = createServer((req, res) => {
  let body = "";
  req.on("data", (d: Buffer) => {
    body += d.toString();
  });
  req.on("end", () => {
    try {
      const d = JSON.parse(body) as { kind: string; to: string; sessionKey: string; text: string };
      console.log(
        `\n[dev connector] ${d.kind} to ${d.to} (${d.sessionKey}):\n  ${d.text.replaceAll("\n", "\n  ")}\n`,
      );
    } catch {
      console.log(`[dev connector] ${body}`);
    }
    res.writeHead(200).end("ok");
  });
});
printer.listen(8788, "127.0.0.1");

const server = await startLocalServer({
  port: 8787,
  persistTo: path.join(root, ".wrangler/state"),
  envFile: devVars,
  inheritOutput: true,
});

const status = await fetch(`${server.url}/rpc/status`, {
  method: "POST",
  headers: { authorization: `Bearer ${token}` },
  body: "{}",
});
const answer = (await status.json().catch(() => ({}))) as {
  payload?: { config?: { valid: boolean; problems?: string[] } };
  error?: { message?: string };
};
if (answer.payload?.config?.valid === false) {
  // The status RPC is the operator's view of an invalid config: every problem, by path.
  console.error(
    `\n[switchboard] SWITCHBOARD_CONFIG (.dev.vars) is invalid; requests answer 500 until it is fixed:\n${(answer.payload.config.problems ?? []).map((p) => `  - ${p}`).join("\n")}\n`,
  );
} else if (!status.ok) {
  console.error(
    `\n[switchboard] the gateway is up but not usable: ${answer.error?.message ?? status.status}\n`,
  );
}

const body = String.raw`{\"messageId\":\"m-$(date +%s%N)\",\"chatType\":\"direct\",\"from\":\"alice\",\"text\":\"hello\"}`;
console.log(`
Switchboard is running on ${server.url} (echo model, operator token "${token}").

  Dashboard: ${server.url}/ui  (log in with the operator token)

  # ask the agent directly, then list sessions
  curl -s -X POST ${server.url}/rpc/agent -H 'authorization: Bearer ${token}' -d '{"message":"hello"}'
  curl -s -X POST ${server.url}/rpc/sessions.list -H 'authorization: Bearer ${token}' -d '{}'

  # the OpenAI-compatible API and the MCP server (same token)
  curl -s ${server.url}/v1/chat/completions -H 'authorization: Bearer ${token}' -H 'content-type: application/json' -d '{"model":"switchboard/main","messages":[{"role":"user","content":"hi"}]}'
  curl -s -X POST ${server.url}/mcp -H 'authorization: Bearer ${token}' -H 'accept: application/json, text/event-stream' -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'

  # the CLI
  SWITCHBOARD_URL=${server.url} SWITCHBOARD_TOKEN=${token} npx switchboard sessions list

  # a signed chat message from the "dev" connector (the reply is printed here)
  body="${body}"; t=$(date +%s)
  sig=$(printf '%s' "$t.$body" | openssl dgst -sha256 -hmac '${connectorSecret}' | sed 's/^.* //')
  curl -s -X POST ${server.url}/hooks/inbound/dev -H "x-switchboard-signature: t=$t,v1=$sig" -d "$body"

  # a webhook caller (CI, mail bridge): run a message and wait for its reply
  curl -s -X POST ${server.url}/hooks/agent -H 'authorization: Bearer ${hooksToken}' -d '{"message":"build 812 failed","name":"CI","waitForCompletion":true}'

  # run the minute's maintenance now (scheduled jobs, reset sweep, retention)
  curl -s '${server.url}/__scheduled?cron=*+*+*+*+*'

Press Ctrl-C to stop.
`);

const shutdown = async () => {
  await server.stop();
  printer.close();
  process.exit(0);
};
process.on("SIGINT", () => void shutdown());
process.on("SIGTERM", () => void shutdown());
