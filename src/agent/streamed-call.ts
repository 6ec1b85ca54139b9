/**
 * A model call streamed from the provider and answered whole (SPEC §22 streaming): a language
 * model middleware whose generate makes the provider's streaming request, hands the call's text
 * on as it grows, and assembles from the stream the result the provider's plain call gives
 * (text, reasoning with its provider metadata, tool calls, usage, finish reason). The loop keeps
 * `generateText` as its one call either way, so what is stored and how a call is retried are
 * the same; the AI SDK's `streamText` would do the same work for about 5 ms more workerd CPU a
 * message (bench row 13, docs/decisions.md "Streamed replies"). Pure of I/O beyond the model's.
 */
import type {
  LanguageModelV4,
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  SharedV4ProviderMetadata,
} from "@ai-sdk/provider";
import { type LanguageModel, wrapLanguageModel } from "ai";

/** `model`, its calls streamed from the provider, `onText` told the text so far. */
export function streamingModel(model: LanguageModel, onText: (text: string) => void): LanguageModel {
  return wrapLanguageModel({
    model: model as LanguageModelV4,
    middleware: {
      specificationVersion: "v4",
      wrapGenerate: async ({ doStream }) => collect(await doStream(), onText),
    },
  });
}

/** Provider metadata merged one level deep (a signature that arrives on a later part). */
function merged(
  a: SharedV4ProviderMetadata | undefined,
  b: SharedV4ProviderMetadata | undefined,
): SharedV4ProviderMetadata | undefined {
  if (!b) return a;
  if (!a) return b;
  const out: SharedV4ProviderMetadata = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = { ...(a[k] ?? {}), ...v };
  return out;
}

type Block = Extract<LanguageModelV4Content, { type: "text" | "reasoning" }>;

/** The plain call's result, read from the streaming call's parts. */
export async function collect(
  result: LanguageModelV4StreamResult,
  onText: (text: string) => void,
): Promise<LanguageModelV4GenerateResult> {
  const content: LanguageModelV4Content[] = [];
  const open = new Map<string, Block>();
  let text = "";
  let finish: Extract<LanguageModelV4StreamPart, { type: "finish" }> | undefined;
  let warnings: Extract<LanguageModelV4StreamPart, { type: "stream-start" }>["warnings"] = [];
  let metadata: Omit<Extract<LanguageModelV4StreamPart, { type: "response-metadata" }>, "type"> = {};
  const reader = result.stream.getReader();
  for (;;) {
    const { done, value: part } = await reader.read();
    if (done) break;
    switch (part.type) {
      case "text-start":
      case "reasoning-start": {
        const block: Block = {
          type: part.type === "text-start" ? "text" : "reasoning",
          text: "",
          ...(part.providerMetadata ? { providerMetadata: part.providerMetadata } : {}),
        };
        open.set(`${block.type}:${part.id}`, block);
        content.push(block);
        break;
      }
      case "text-delta":
      case "reasoning-delta": {
        const kind = part.type === "text-delta" ? "text" : "reasoning";
        let block = open.get(`${kind}:${part.id}`);
        if (block === undefined) {
          // A provider that sends deltas without a start: the block starts here.
          const started: Block = { type: kind, text: "" };
          open.set(`${kind}:${part.id}`, started);
          content.push(started);
          block = started;
        }
        block.text += part.delta;
        const meta = merged(block.providerMetadata, part.providerMetadata);
        if (meta) block.providerMetadata = meta;
        if (kind === "text" && part.delta) {
          text += part.delta;
          onText(text);
        }
        break;
      }
      case "text-end":
      case "reasoning-end": {
        const kind = part.type === "text-end" ? "text" : "reasoning";
        const block = open.get(`${kind}:${part.id}`);
        const meta = block && merged(block.providerMetadata, part.providerMetadata);
        if (block && meta) block.providerMetadata = meta;
        if (block?.type === "text" && part.type === "text-end" && part.citations)
          block.citations = part.citations;
        break;
      }
      case "stream-start":
        warnings = part.warnings;
        break;
      case "response-metadata": {
        const { type: _type, ...rest } = part;
        metadata = rest;
        break;
      }
      case "finish":
        finish = part;
        break;
      case "error":
        throw part.error;
      case "tool-input-start":
      case "tool-input-delta":
      case "tool-input-end":
      case "ping":
      case "raw":
        break;
      default:
        // A whole part of the result: a tool call, a file, a source, a provider's own content.
        content.push(part);
    }
  }
  if (!finish) throw new Error("the model's stream ended without finishing");
  return {
    content: content.filter((c) =>
      c.type === "text" || c.type === "reasoning" ? c.text !== "" || !!c.providerMetadata : true,
    ),
    finishReason: finish.finishReason,
    usage: finish.usage,
    ...(finish.providerMetadata ? { providerMetadata: finish.providerMetadata } : {}),
    ...(result.request ? { request: result.request } : {}),
    response: { ...metadata, ...(result.response?.headers ? { headers: result.response.headers } : {}) },
    warnings,
  };
}
