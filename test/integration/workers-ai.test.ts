/**
 * The `workers-ai` provider through the `AI` binding (SPEC §5). The binding is a stub that
 * answers what the real `env.AI.run` answers for text-generation models: `{ response, usage }`
 * for text, `{ response: null, tool_calls: [{ name, arguments }], usage }` for a tool call.
 */
import { describe, expect, it } from "vitest";
import type { TranscriptMessage } from "../../src/transcript/message";
import { changeActorEnv, rpc, waitRun } from "./support";

const MODEL = "@cf/meta/llama-3.1-8b-instruct";
const CONFIG = { agents: { defaults: { model: `workers-ai/${MODEL}` } } };

interface RunInputs {
  messages: Array<{ role: string; content: unknown; tool_calls?: unknown[]; tool_call_id?: string }>;
  tools?: Array<{ type: string; function: { name: string; parameters: unknown } }>;
  max_tokens?: number;
}

/** A stub of the AI binding: records every run and answers from the script. */
function aiBinding(script: unknown[]) {
  const calls: Array<{ model: string; inputs: RunInputs }> = [];
  return {
    calls,
    binding: {
      async run(model: string, inputs: RunInputs) {
        calls.push({ model, inputs });
        const next = script.shift();
        if (next instanceof Error) throw next;
        return next ?? { response: "fallback", usage: { prompt_tokens: 1, completion_tokens: 1 } };
      },
    },
  };
}

/** Gives one actor instance a config and an AI binding (or none). */
async function withActor(sessionKey: string, ai: unknown) {
  await changeActorEnv(sessionKey, { config: CONFIG, vars: { AI: ai } });
}

async function runOnce(sessionKey: string, message: string) {
  const ack = await rpc<{ runId: string }>("agent", { sessionKey, message });
  expect(ack.ok).toBe(true);
  const wait = await waitRun(ack.payload.runId);
  const run = await rpc<{ status: string; error?: string; usage?: Record<string, number> }>("runs.get", {
    runId: ack.payload.runId,
  });
  return { wait, run: run.payload };
}

describe("workers-ai through the AI binding", () => {
  it("answers with the model's text and records its usage", async () => {
    const key = "agent:main:workers-ai-text";
    const ai = aiBinding([
      { response: "Hello from Llama.", usage: { prompt_tokens: 42, completion_tokens: 5, total_tokens: 47 } },
    ]);
    await withActor(key, ai.binding);
    const { wait, run } = await runOnce(key, "say hello");
    expect(wait.status).toBe("ok");
    expect(run.usage).toMatchObject({ inputTokens: 42, outputTokens: 5 });

    expect(ai.calls).toHaveLength(1);
    const [call] = ai.calls;
    expect(call?.model).toBe(MODEL);
    expect(call?.inputs.messages[0]?.role).toBe("system");
    expect(call?.inputs.messages.at(-1)).toMatchObject({ role: "user", content: "say hello" });
    expect(call?.inputs.tools?.map((t) => t.function.name)).toContain("current_time");

    const history = await rpc<{ messages: TranscriptMessage[] }>("chat.history", { sessionKey: key });
    expect(history.payload.messages.at(-1)).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text: "Hello from Llama." }],
      model: `workers-ai/${MODEL}`,
    });
  });

  it("runs a tool the model calls and sends the result back", async () => {
    const key = "agent:main:workers-ai-tool";
    const ai = aiBinding([
      {
        response: null,
        tool_calls: [{ name: "current_time", arguments: {} }],
        usage: { prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 },
      },
      { response: "It is noon.", usage: { prompt_tokens: 60, completion_tokens: 4, total_tokens: 64 } },
    ]);
    await withActor(key, ai.binding);
    const { wait, run } = await runOnce(key, "what time is it?");
    expect(wait.status).toBe("ok");
    expect(run.usage).toMatchObject({ inputTokens: 90, outputTokens: 12 });

    expect(ai.calls).toHaveLength(2);
    const followUp = ai.calls[1]?.inputs.messages ?? [];
    const assistant = followUp.find((m) => m.role === "assistant");
    expect(JSON.stringify(assistant?.tool_calls)).toContain("current_time");
    const toolMessage = followUp.find((m) => m.role === "tool");
    expect(JSON.parse(String(toolMessage?.content))).toMatchObject({ timezone: "UTC" });

    const history = await rpc<{ messages: TranscriptMessage[] }>("chat.history", {
      sessionKey: key,
      includeTools: true,
    });
    expect(history.payload.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "toolResult",
      "assistant",
    ]);
    expect(history.payload.messages[1]?.content).toEqual([
      { type: "toolCall", id: expect.any(String), name: "current_time", arguments: {} },
    ]);
    expect(history.payload.messages[2]).toMatchObject({ toolName: "current_time", isError: false });
  });

  it("ends the run with an error naming the binding when AI is not bound", async () => {
    const key = "agent:main:workers-ai-unbound";
    await withActor(key, undefined);
    const { wait, run } = await runOnce(key, "hello?");
    expect(wait.status).toBe("error");
    expect(run.status).toBe("error");
    expect(run.error).toContain("binding AI");
    expect(run.error).toContain('[ai] binding = "AI"');
  });
});
