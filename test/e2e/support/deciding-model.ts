/**
 * An OpenAI-compatible model on 127.0.0.1 that decides each answer from the request (its system
 * prompt, its last message and the last user message) with the `decide` function a suite gives
 * it, rather than from a script; a request matching `hangOn` hangs until released, so a test can
 * hold a turn (or kill the gateway) mid-flow.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { connectorConfig } from "./gateway.ts";
import { chatCompletion, readBody, serveJson, textOf } from "./http-fake.ts";

export interface SeenRequest {
  system: string;
  lastRole: string;
  lastUser: string;
  outcome: "pending" | "answered" | "client-closed";
}

export type Answer = { text: string } | { tool: string; args: unknown };

export interface DecidingModel {
  baseUrl: string;
  requests: SeenRequest[];
  /** The next request matching `match` hangs until released; resolves when it arrived. */
  hangOn(match: (r: SeenRequest) => boolean): { started: Promise<SeenRequest>; release(): void };
  close(): Promise<void>;
}

export const B_REPLY = "B says pong";
export const ANNOUNCE_TEXT = "B announces: the exchange is done";
export const SUBAGENT_RESULT = "the answer is 42";

/**
 * What every agent answers in the session-tools suites (SPEC §17 prompts decide the phase):
 * `send:{…}` / `spawn:{…}` as the last user message call `sessions_send` / `sessions_spawn`.
 */
export function decideSessionTools(r: SeenRequest): Answer {
  if (r.system.includes("## Sub-agent")) {
    if (r.system.includes("This is the announce step")) return { text: SUBAGENT_RESULT };
    return { text: "42" };
  }
  if (r.system.includes("This is the announce step")) return { text: ANNOUNCE_TEXT };
  const round = /This is reply-back round (\d+)/.exec(r.system);
  if (round) return { text: `round reply ${round[1]}` };
  if (r.system.includes("The message below was sent by the requester session")) return { text: B_REPLY };
  if (r.lastRole === "tool") return { text: "tool done" };
  const call = /(send|spawn):(\{.*\})\s*$/s.exec(r.lastUser);
  if (call) {
    return {
      tool: call[1] === "send" ? "sessions_send" : "sessions_spawn",
      args: JSON.parse(call[2] ?? "{}"),
    };
  }
  return { text: `answer to ${r.lastUser.slice(-40)}` };
}

function completion(answer: Answer, model: string, n: number) {
  return chatCompletion({
    id: `chatcmpl-deciding-${n}`,
    model,
    text: "text" in answer ? answer.text : null,
    toolCalls:
      "tool" in answer ? [{ id: `call_${n}`, name: answer.tool, arguments: answer.args }] : undefined,
    usage: { prompt: 100, completion: 20 },
  });
}

export async function startDecidingModel(decide: (r: SeenRequest) => Answer): Promise<DecidingModel> {
  const requests: SeenRequest[] = [];
  const hangs: Array<{
    match: (r: SeenRequest) => boolean;
    started: (r: SeenRequest) => void;
    released: Promise<void>;
  }> = [];
  const releases: Array<() => void> = [];

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    const parsed = JSON.parse(raw) as { model: string; messages: Array<{ role: string; content?: unknown }> };
    const last = parsed.messages.at(-1);
    const lastUser = [...parsed.messages].reverse().find((m) => m.role === "user");
    const record: SeenRequest = {
      system: parsed.messages
        .filter((m) => m.role === "system")
        .map((m) => textOf(m.content))
        .join("\n"),
      lastRole: last?.role ?? "",
      lastUser: lastUser ? textOf(lastUser.content) : "",
      outcome: "pending",
    };
    const n = requests.push(record);
    res.on("close", () => {
      if (record.outcome === "pending") record.outcome = "client-closed";
    });
    const hangAt = hangs.findIndex((h) => h.match(record));
    if (hangAt >= 0) {
      const [hang] = hangs.splice(hangAt, 1);
      hang?.started(record);
      await hang?.released;
    }
    if (res.destroyed || res.writableEnded) return;
    record.outcome = "answered";
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(completion(decide(record), parsed.model, n)));
  };

  const server = await serveJson("deciding model", handle);
  return {
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    requests,
    hangOn(match) {
      let started!: (r: SeenRequest) => void;
      let release!: () => void;
      const startedP = new Promise<SeenRequest>((r) => {
        started = r;
      });
      const released = new Promise<void>((r) => {
        release = r;
      });
      releases.push(release);
      hangs.push({ match, started, released });
      return { started: startedP, release };
    },
    async close() {
      for (const r of releases) r();
      await server.close();
    },
  };
}

/**
 * The gateway config of a suite whose agents all ask the deciding model at `modelUrl` and whose
 * chat is the fake connector at `connectorUrl`: the session tools' visibility and reply-back rounds.
 */
export function decidingConfig(
  connectorUrl: string,
  modelUrl: string,
  sessions: { visibility: "agent" | "all"; maxPingPongTurns: number },
) {
  return {
    connectors: connectorConfig(connectorUrl),
    models: {
      providers: { fake: { api: "openai-compatible", baseUrl: modelUrl } },
      retry: { attempts: 2, baseDelayMs: 50 },
    },
    agents: { defaults: { model: "fake/test-model" }, list: [{ id: "main", default: true }] },
    tools: { sessions: { visibility: sessions.visibility } },
    session: { agentToAgent: { maxPingPongTurns: sessions.maxPingPongTurns } },
  };
}
