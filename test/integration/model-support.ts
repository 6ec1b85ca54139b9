/**
 * A scripted OpenAI-compatible model at https://model.test and a fake connector at
 * https://connector.test, behind one fetch spy (the actors run in the test isolate).
 */
import { vi } from "vitest";
import { SIGNATURE_HEADER } from "../../src/auth/signature";
import type { TranscriptMessage } from "../../src/transcript/message";
import { changeActorEnv, type Delivered, inbound, rpc, waitRun } from "./support";

export interface ModelRequest {
  system: string;
  lastUser: string;
  lastRole: string;
  lastTool?: string;
  messages: Array<{ role: string; content: unknown }>;
}

/**
 * `delayMs` answers only after that many milliseconds (a slow model); `held` answers only once
 * it returns false (checked every few milliseconds; the call's abort still ends it).
 */
type Timing = {
  delayMs?: number;
  held?: () => boolean;
  /** The call's `usage` as the provider reports it (default 100 prompt / 10 completion tokens). */
  usage?: Record<string, unknown>;
};
export type ModelAnswer =
  | ({ text: string } & Timing)
  | ({ tool: string; args: unknown } & Timing)
  | ({ status: number; error: string } & Timing);

/** Config pieces that route a session's runs to the scripted model. */
export const SCRIPTED_MODEL_CONFIG = {
  models: {
    providers: { fake: { api: "openai-compatible", baseUrl: "https://model.test/v1" } },
    retry: { attempts: 2, baseDelayMs: 1 },
  },
  agents: { defaults: { model: "fake/m" } },
};

function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? "").join("");
  return "";
}

export function scriptedWorld(answer: (req: ModelRequest) => ModelAnswer) {
  const real = globalThis.fetch;
  const delivered: Delivered[] = [];
  const requests: ModelRequest[] = [];
  let calls = 0;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const body = typeof init?.body === "string" ? init.body : "";
    if (url.startsWith("https://connector.test/")) {
      delivered.push({
        url,
        signature: new Headers(init?.headers).get(SIGNATURE_HEADER),
        body: JSON.parse(body) as Record<string, unknown>,
      });
      return new Response("ok");
    }
    if (!url.startsWith("https://model.test/")) return real(input, init);
    calls++;
    const parsed = JSON.parse(body) as { messages: Array<{ role: string; content: unknown; name?: string }> };
    const msgs = parsed.messages;
    const last = msgs[msgs.length - 1];
    const req: ModelRequest = {
      system: msgs
        .filter((m) => m.role === "system")
        .map((m) => text(m.content))
        .join("\n"),
      lastUser: text([...msgs].reverse().find((m) => m.role === "user")?.content),
      lastRole: last?.role ?? "",
      lastTool: last?.role === "tool" ? text(last.content) : undefined,
      messages: msgs,
    };
    requests.push(req);
    const a = answer(req);
    if (a.delayMs) {
      const signal = init?.signal ?? undefined;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, a.delayMs);
        signal?.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(signal.reason);
        });
      });
    }
    while (a.held?.()) {
      init?.signal?.throwIfAborted();
      await new Promise((r) => setTimeout(r, 5));
    }
    if ("status" in a)
      return new Response(JSON.stringify({ error: { message: a.error } }), { status: a.status });
    const message =
      "tool" in a
        ? {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: `call_${calls}`,
                type: "function",
                function: { name: a.tool, arguments: JSON.stringify(a.args) },
              },
            ],
          }
        : { role: "assistant", content: a.text };
    return Response.json({
      id: `cmpl-${calls}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: "m",
      choices: [{ index: 0, message, finish_reason: "tool" in a ? "tool_calls" : "stop" }],
      usage: a.usage ?? { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
    });
  });
  return { delivered, requests, calls: () => calls, restore: () => spy.mockRestore() };
}

/** The connector the scripted world records (the same as TEST_CONFIG's telegram connector). */
export const CONNECTORS = {
  telegram: { deliverUrl: "https://connector.test/telegram", secretEnv: "DEV_CONNECTOR_SECRET" },
};

/** A telegram group session key and a signed-webhook body for it. */
export const group = (id: string) => `agent:main:telegram:group:${id}`;
export const groupMessage = (groupId: string, text: string) => ({
  messageId: `m-${groupId}-${crypto.randomUUID()}`,
  chatType: "group",
  from: "u1",
  groupId,
  text,
});

/** The whole current transcript of a session (tool results included). */
export async function history(sessionKey: string): Promise<TranscriptMessage[]> {
  const res = await rpc<{ messages: TranscriptMessage[] }>("chat.history", { sessionKey, limit: 1000 });
  return res.payload.messages;
}

/**
 * A telegram group session that has run once (the test config's echo model), its actor then
 * given the scripted model (and `extra`) for its next runs.
 */
export async function scriptedGroup(id: string, extra: Record<string, unknown> = {}): Promise<void> {
  const ack = (await (await inbound("telegram", groupMessage(id, "hello"))).json()) as { runId: string };
  await waitRun(ack.runId);
  await changeActorEnv(group(id), { config: { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS, ...extra } });
}

/** Sends `text` to group `id` and waits for its run to end; its run id. */
export async function sayInGroup(id: string, text: string): Promise<string> {
  const ack = (await (await inbound("telegram", groupMessage(id, text))).json()) as { runId: string };
  await waitRun(ack.runId);
  return ack.runId;
}

/** The parsed result of the latest call of `tool` in a transcript. */
export function lastToolResult<T = Record<string, unknown>>(messages: TranscriptMessage[], tool: string): T {
  const m = messages.filter((x) => x.role === "toolResult" && x.toolName === tool).at(-1);
  if (!m) throw new Error(`no ${tool} result in the transcript`);
  return JSON.parse((m.content[0] as { text: string }).text) as T;
}

/**
 * A requester that spawns on `spawn:{…}` (the JSON is sessions_spawn's arguments) and
 * acknowledges the tool's result; its sub-agents answer with `child`.
 */
export function spawningScript(child: (req: ModelRequest) => ModelAnswer) {
  return (req: ModelRequest): ModelAnswer => {
    if (req.system.includes("## Sub-agent")) return child(req);
    if (req.lastRole === "tool") return { text: `spawned: ${req.lastTool}` };
    if (req.lastUser.startsWith("spawn:"))
      return { tool: "sessions_spawn", args: JSON.parse(req.lastUser.slice(6)) };
    return { text: `answer to ${req.lastUser}` };
  };
}
