/**
 * A run's timeline as `runs.get` answers it (SPEC §21): the time it waited in the queue, the
 * model and tool spans its agent loop recorded, and each of its deliveries, in start order.
 * Pure: the run's row and its deliveries' rows in, spans out.
 */
import type { TimelineSpan } from "../transcript/message";

export interface TimelineRun {
  createdAt: number;
  startedAt?: number | null;
  endedAt?: number | null;
  /** The loop's spans as stored on the run (or held by its actor while it runs). */
  timeline?: readonly TimelineSpan[] | null;
}

export interface TimelineDelivery {
  kind: string;
  status: string;
  createdAt: number;
  updatedAt: number;
  deliveredAt?: number | null;
}

/**
 * `now` ends the spans still open: a run still queued has waited until now, a delivery not
 * settled has taken until its latest attempt.
 */
export function runTimeline(
  run: TimelineRun,
  deliveries: readonly TimelineDelivery[],
  now: number,
): TimelineSpan[] {
  const queuedUntil = run.startedAt ?? run.endedAt ?? now;
  const spans: TimelineSpan[] = [
    { phase: "queued", startedAt: run.createdAt, ms: Math.max(0, queuedUntil - run.createdAt) },
    ...(run.timeline ?? []),
    ...deliveries.map((d) => ({
      phase: "delivery" as const,
      name: d.kind,
      startedAt: d.createdAt,
      ms: Math.max(0, (d.deliveredAt ?? d.updatedAt) - d.createdAt),
      outcome: d.status,
    })),
  ];
  // Stable: spans that start in the same millisecond keep the order they were recorded in.
  return spans
    .map((s, i) => [s, i] as const)
    .sort((a, b) => a[0].startedAt - b[0].startedAt || a[1] - b[1])
    .map(([s]) => s);
}
