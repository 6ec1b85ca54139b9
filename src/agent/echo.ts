/**
 * The built-in `echo` provider: a deterministic LanguageModelV4 with no network, the default
 * model so that a fresh checkout runs without keys.
 *
 * - It answers `echo: <last user text>`.
 * - A user text of the form `call:<tool> {json args}` makes it call that tool (when the tool is
 *   offered); after the tool result it answers `echo: <tool> -> <result json>`. This keeps the
 *   whole tool loop exercisable without a real model.
 * - Usage is estimated as one token per four characters, so token accounting is exercised too;
 * - the answer is cut at `maxOutputTokens` (four characters per token), as a real model stops.
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
  LanguageModelV4Message,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { estimateTokens } from "../transcript/tokens";

const CALL_PATTERN = /^call:([a-zA-Z0-9_-]+)\s*(\{[\s\S]*\})?\s*$/;

export { estimateTokens };

function messageText(message: LanguageModelV4Message): string {
  if (typeof message.content === "string") return message.content;
  return message.content
    .map((part) => {
      if (part.type === "text") return part.text;
      if (part.type === "tool-call") return JSON.stringify(part.input);
      if (part.type === "tool-result") return JSON.stringify(part.output);
      return "";
    })
    .join("");
}

function respond(options: LanguageModelV4CallOptions, modelId: string): LanguageModelV4GenerateResult {
  const prompt = options.prompt;
  const last = prompt[prompt.length - 1];
  const offered = new Set((options.tools ?? []).map((t) => t.name));
  const content: LanguageModelV4Content[] = [];
  let finish: "stop" | "tool-calls" = "stop";

  if (last?.role === "tool") {
    const results = last.content.flatMap((part) =>
      part.type === "tool-result" ? [`${part.toolName} -> ${JSON.stringify(part.output)}`] : [],
    );
    content.push({ type: "text", text: `echo: ${results.join("; ")}` });
  } else {
    const lastUser = [...prompt].reverse().find((m) => m.role === "user");
    const text = lastUser ? messageText(lastUser).trim() : "";
    const call = CALL_PATTERN.exec(text);
    if (call?.[1] && offered.has(call[1])) {
      let callIndex = 0;
      for (const m of prompt) if (m.role === "assistant") callIndex++;
      content.push({
        type: "tool-call",
        toolCallId: `echo-call-${callIndex}`,
        toolName: call[1],
        input: call[2] ?? "{}",
      });
      finish = "tool-calls";
    } else {
      content.push({ type: "text", text: `echo: ${text}` });
    }
  }
  // Like a real model, the answer stops at maxOutputTokens (the summarizer relies on it).
  const limit = options.maxOutputTokens;
  if (limit !== undefined) {
    for (const c of content)
      if (c.type === "text" && c.text.length > limit * 4) c.text = c.text.slice(0, limit * 4);
  }

  const promptChars = prompt.reduce((n, m) => n + messageText(m).length, 0);
  const outputChars = content.reduce(
    (n, c) => n + (c.type === "text" ? c.text.length : c.type === "tool-call" ? c.input.length : 0),
    0,
  );
  const inputTokens = Math.max(1, Math.ceil(promptChars / 4));
  const outputTokens = Math.max(1, Math.ceil(outputChars / 4));
  return {
    content,
    finishReason: { unified: finish, raw: finish },
    usage: {
      inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: outputTokens, text: outputTokens, reasoning: 0 },
    },
    response: { id: `echo-${Date.now()}`, modelId, timestamp: new Date() },
    warnings: [],
  };
}

export function createEchoModel(modelId = "echo"): LanguageModelV4 {
  return {
    specificationVersion: "v4",
    provider: "echo",
    modelId,
    supportedUrls: {},
    async doGenerate(options) {
      return respond(options, modelId);
    },
    async doStream(options) {
      const result = respond(options, modelId);
      const parts: LanguageModelV4StreamPart[] = [{ type: "stream-start", warnings: [] }];
      for (const [i, c] of result.content.entries()) {
        if (c.type === "text") {
          parts.push({ type: "text-start", id: `t${i}` });
          parts.push({ type: "text-delta", id: `t${i}`, delta: c.text });
          parts.push({ type: "text-end", id: `t${i}` });
        } else parts.push(c as LanguageModelV4StreamPart);
      }
      parts.push({ type: "finish", finishReason: result.finishReason, usage: result.usage });
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const p of parts) controller.enqueue(p);
            controller.close();
          },
        }),
      };
    },
  };
}
