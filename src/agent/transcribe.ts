/**
 * Audio to text (SPEC §22 `media.transcription`): a voice note or audio file a person sent is
 * transcribed before its run, and the transcript is the message's text. An `openai` or
 * `openai-compatible` provider is called at its `/audio/transcriptions` (the AI SDK's OpenAI
 * transcription model, which speaks that endpoint for any base URL); `workers-ai` runs Whisper
 * through the AI binding. No I/O but the provider's.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { experimental_transcribe as transcribe } from "ai";
import type { Config } from "../config/schema";
import { aiBinding, apiKey, ModelRefError, resolveModelRef } from "./models";
import { describeProviderError } from "./retry";

export class TranscriptionError extends Error {}

/** The text of `audio` by the configured transcription model; throws TranscriptionError. */
export async function transcribeAudio(
  audio: Uint8Array,
  config: Config,
  env: Record<string, unknown>,
  signal: AbortSignal,
): Promise<string> {
  const ref = config.media.transcription?.model;
  if (!ref) throw new TranscriptionError("no media.transcription.model is configured");
  try {
    const { spec, provider, modelId } = resolveModelRef(ref, config);
    switch (spec.api) {
      case "openai":
      case "openai-compatible": {
        const model = createOpenAI({
          apiKey: apiKey(spec, provider, env) ?? "none",
          baseURL: spec.baseUrl,
          headers: spec.headers,
        }).transcription(modelId);
        const result = await transcribe({ model, audio, maxRetries: 1, abortSignal: signal });
        return result.text.trim();
      }
      case "workers-ai": {
        const out = (await aiBinding(provider, env).run(
          modelId as never,
          { audio: [...audio] } as never,
        )) as {
          text?: string;
        };
        return (out.text ?? "").trim();
      }
      default:
        throw new TranscriptionError(
          `media.transcription.model "${ref}": provider "${provider}" (${spec.api}) has no transcription; use an openai, openai-compatible or workers-ai provider`,
        );
    }
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    if (error instanceof TranscriptionError) throw error;
    if (error instanceof ModelRefError) throw new TranscriptionError(error.message);
    throw new TranscriptionError(describeProviderError(error));
  }
}
