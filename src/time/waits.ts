/**
 * Bounded waits on work in flight, in memory by nature: a live request waiting for a run to end
 * (`agent.wait`), a run waiting a moment for its reply's first attempt, a chat's typing
 * indicator renewed while a run lasts. None of them decides durable work: what must happen
 * later, after a restart too, is due work of the SessionActor's alarm (session/scheduler.ts).
 */

/** `promise`'s value, or undefined when `ms` passed first (the promise goes on). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** Calls `tick` every `ms` until the returned function is called. */
export function every(ms: number, tick: () => void): () => void {
  const timer = setInterval(tick, ms);
  return () => clearInterval(timer);
}
