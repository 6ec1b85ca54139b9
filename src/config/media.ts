/**
 * The `media` section of the config (SPEC §22): where files people send are kept (an R2
 * binding), how large one may be, and which model transcribes audio. Validation only; the
 * fetching, storing and transcribing are the run's (session/run/media.ts).
 */
import { z } from "zod";
import { intBetween } from "./fields";
import { BindingName } from "./storage";

const MB = 1024 * 1024;

export const MediaSchema = z.strictObject({
  /** The R2 binding files are stored in; without it a file is named to the model, not kept. */
  r2: BindingName.optional(),
  /** The largest file kept (default 20 MB); a larger one gets a notice and no run. */
  maxBytes: intBetween(1, 100 * MB).default(20 * MB),
  /**
   * The model audio is transcribed with: `provider/model` of an `openai` or `openai-compatible`
   * provider (its `/audio/transcriptions`), or `workers-ai/@cf/openai/whisper…`. Without it a
   * voice note is named to the model, not transcribed.
   */
  transcription: z
    .strictObject({ model: z.string().regex(/^[^/\s]+\/\S/, "must be a provider/model reference") })
    .optional(),
});
export type MediaConfig = z.output<typeof MediaSchema>;
