/**
 * Watches (SPEC §20 "State awareness"), the pure part: which sessions a run started watching —
 * each sub-agent it spawned, and each target of a `sessions_send` with `watch: true` — read from
 * the tool results the run produced (the lifecycle registers them when the run ends), and the
 * note a watcher's next run gets when a watched session changed.
 */
import type { TranscriptMessage } from "../transcript/message";
import { textOf } from "../transcript/message";

/** A session watched since `seen` (the version of its signal log the watcher has seen). */
export interface Watch {
  key: string;
  seen: number;
}

/** The most sessions one session watches (the newest watches are kept). */
export const MAX_WATCHES = 20;

/** The kinds of change a watcher is told of: what a person or an operator did to the session. */
export const NOTED_KINDS: ReadonlySet<string> = new Set(["human_message", "reset", "settings_changed"]);

/** The watches a run's tool results start, in order. */
export function watchesOf(produced: readonly TranscriptMessage[]): Watch[] {
  const out: Watch[] = [];
  for (const m of produced) {
    if (m.role !== "toolResult" || m.isError) continue;
    if (m.toolName !== "sessions_spawn" && m.toolName !== "sessions_send") continue;
    let result: {
      status?: unknown;
      childSessionKey?: unknown;
      watched?: unknown;
      watchKey?: unknown;
      watchVersion?: unknown;
    };
    try {
      result = JSON.parse(textOf(m));
    } catch {
      continue;
    }
    if (
      m.toolName === "sessions_spawn" &&
      result.status === "accepted" &&
      typeof result.childSessionKey === "string"
    ) {
      out.push({ key: result.childSessionKey, seen: 0 });
    }
    if (m.toolName === "sessions_send" && result.watched === true && typeof result.watchKey === "string") {
      out.push({
        key: result.watchKey,
        seen: typeof result.watchVersion === "number" ? result.watchVersion : 0,
      });
    }
  }
  return out;
}

/** `watches` with `added` (an existing watch keeps what it has seen), the newest MAX_WATCHES. */
export function mergeWatches(watches: readonly Watch[], added: readonly Watch[]): Watch[] {
  const byKey = new Map(watches.map((w) => [w.key, w]));
  for (const w of added) if (!byKey.has(w.key)) byKey.set(w.key, w);
  return [...byKey.values()].slice(-MAX_WATCHES);
}

/** The one note a watcher gets for a watched session that changed (SPEC §20's wording). */
export function watchNote(key: string, kind: string, since: number): string {
  return `Session "${key}" changed (${kind}). Reconcile before acting: session_status sessionKey "${key}" changesSince ${since}.`;
}
