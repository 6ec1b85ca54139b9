/**
 * What a chat sees while a run writes its reply (SPEC §22 streaming): one preview message,
 * posted once the reply has 40 characters or has been under way for a second and more of it is
 * still coming (`partial`: a reply that arrives in one piece is posted as the reply, never
 * previewed), or at once with the run's progress (`progress`), then edited as it changes, never twice within the
 * connector's `minIntervalMs`. The edits follow the model's text: one is made when text arrives
 * and the interval since the last has passed, and none waits on a timer of its own (text that
 * arrives in between shows with the next edit, or with the reply). The preview's id is kept in
 * the run's checkpoint the moment it exists (`keep`), so a resumed run edits the same one and
 * its reply takes its place (delivery/deliver.ts) or deletes it (lifecycle.ts): a crash leaves
 * at most a stale preview, and the reply is still the outbox's one delivery. The reply keeps the
 * chat's pace too: `settle` says when its edit may be made, and the outbox holds it until then
 * (a due time of the actor's one alarm, not a wait of the run).
 *
 * A preview is best effort: a failed call is logged and the next change tries again; after
 * MAX_FAILURES in a row the run shows no more previews.
 */
import type { PreviewPort } from "../../delivery/preview";

/** The first preview waits for this much text… */
export const FIRST_PREVIEW_CHARS = 40;
/** …or this long after the reply started. */
export const FIRST_PREVIEW_MS = 1_000;
/** Failed calls in a row after which a run gives up on its preview. */
const MAX_FAILURES = 3;

export interface PreviewClock {
  now(): number;
}

const realClock: PreviewClock = { now: () => Date.now() };

export class ReplyPreview {
  private latest = "";
  private shown = "";
  /** Texts offered: the first piece of a reply alone never posts a preview. */
  private offers = 0;
  private startedAt: number | undefined;
  private lastCallAt = Number.NEGATIVE_INFINITY;
  private inFlight: Promise<void> | undefined;
  private failures = 0;
  private stopped = false;
  /** Calls made (posts and edits), for the bench and tests. */
  calls = 0;

  constructor(
    private readonly port: Pick<PreviewPort, "mode" | "minIntervalMs" | "show"> & { maxChars?: number },
    /** The preview a previous attempt of the run posted, if any. */
    private messageId: string | undefined,
    /** Makes a newly posted preview's id durable (the run's checkpoint). */
    private readonly keep: (messageId: string) => void,
    private readonly clock: PreviewClock = realClock,
  ) {}

  /** The reply's text so far (`partial`). */
  text(text: string): void {
    if (this.port.mode === "partial") this.offer(text);
  }

  /** What the run is doing (`progress`): thinking, or using a tool. */
  progress(label: string): void {
    if (this.port.mode === "progress") this.offer(label);
  }

  private offer(text: string): void {
    if (this.stopped || !text.trim()) return;
    this.offers++;
    this.latest = text;
    this.startedAt ??= this.clock.now();
    this.pump();
  }

  private pump(): void {
    if (this.inFlight || this.stopped || this.latest === this.shown) return;
    const now = this.clock.now();
    const early =
      this.messageId === undefined &&
      this.port.mode === "partial" &&
      (this.offers < 2 ||
        (this.latest.length < FIRST_PREVIEW_CHARS && now - (this.startedAt ?? now) < FIRST_PREVIEW_MS));
    if (early || now - this.lastCallAt < this.port.minIntervalMs) return;
    this.lastCallAt = now;
    this.calls++;
    const text = this.latest;
    this.inFlight = this.port
      .show(text, this.messageId)
      .then(
        (r) => {
          if (!r.ok) return this.failed(r.error);
          this.failures = 0;
          this.shown = text;
          if (this.messageId === undefined) {
            this.messageId = r.messageId;
            this.keep(r.messageId);
          }
        },
        (error: unknown) => this.failed(error instanceof Error ? error.message : String(error)),
      )
      .finally(() => {
        this.inFlight = undefined;
        this.pump();
      });
  }

  private failed(error: string): void {
    console.warn(`a reply preview failed: ${error}`);
    if (++this.failures >= MAX_FAILURES) this.stopped = true;
  }

  /**
   * Ends the previews: waits for the call under way. Returns the preview's id, if any, and when
   * the reply's own edit may be made: the interval after the last call, so the chat's pace
   * holds; undefined when the preview shows `reply` already (its edit changes nothing the chat
   * sees) or the interval has passed.
   */
  async settle(reply?: string): Promise<{ messageId: string; notBefore?: number } | undefined> {
    this.stopped = true;
    await this.inFlight;
    if (this.messageId === undefined) return undefined;
    // A reply longer than one message is split: its first part changes what the preview shows.
    const whole = reply !== undefined && reply.length <= (this.port.maxChars ?? Number.POSITIVE_INFINITY);
    const current = whole && reply.trim() === this.shown.trim();
    const notBefore = this.lastCallAt + this.port.minIntervalMs;
    return !current && notBefore > this.clock.now()
      ? { messageId: this.messageId, notBefore }
      : { messageId: this.messageId };
  }
}
