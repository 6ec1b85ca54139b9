/**
 * The hosts a SessionActor hands its modules, built once from its parts: each is the few
 * capabilities its module declares (run/admission.ts, run/lifecycle.ts, run/turn.ts,
 * chat/commands.ts, chat/posts.ts, flows/handoff.ts, entry/changes.ts), and no module gets
 * another's. `env` and `config` are read on every access: they are the runtime's, per request.
 */
import type { Config } from "../config/schema";
import type { DeliveryOutbox } from "../delivery/outbox";
import { previewPort } from "../delivery/preview";
import type { EnqueueRequest } from "../runs/types";
import type { CommandHost } from "./chat/commands";
import type { PostHost } from "./chat/posts";
import { actorSessions } from "./client";
import type { ContextStore } from "./context/copy";
import type { ActorRecords } from "./d1/records";
import type { EntryHost } from "./entry/changes";
import { continueFlows, type FlowHost } from "./flows/handoff";
import { type AdmissionHost, admit } from "./run/admission";
import { usageEvents } from "./run/analytics";
import type { LifecycleHost } from "./run/lifecycle";
import type { LiveRun } from "./run/live";
import { ingestMedia } from "./run/media";
import type { RunQueue } from "./run/queue";
import { noticeToolActivity, runTurn, type TurnHost } from "./run/turn";
import type { RunWaiters } from "./run/waiters";
import type { ActorStore } from "./storage/store";

/** What the actor is made of, as the wiring sees it. */
export interface ActorParts {
  env(): Env;
  config(): Config;
  store: ActorStore;
  queue: RunQueue;
  outbox: DeliveryOutbox;
  records: ActorRecords;
  context: ContextStore;
  waiters: RunWaiters;
  live: LiveRun;
  /** Sets the alarm for what is due (the scheduler). */
  schedule(): Promise<void>;
  /** Aborts the session's runs; how many. */
  stop(): Promise<number>;
}

/** The longest a run's files may take to fetch, keep and transcribe before its attempt is retried. */
const MEDIA_FETCH_BUDGET_MS = 120_000;

export interface ActorHosts {
  admission: AdmissionHost;
  lifecycle: LifecycleHost;
  commands: CommandHost;
  flows: FlowHost;
  entry: EntryHost;
  posts: PostHost;
}

export function actorHosts(p: ActorParts): ActorHosts {
  const { store, queue, outbox, records, context, waiters, live, stop } = p;
  const schedule = () => p.schedule();
  const admission: AdmissionHost = {
    get config() {
      return p.config();
    },
    store,
    queue,
    records,
    live,
    schedule,
  };
  const admitHere = (req: EnqueueRequest) => admit(admission, req);
  const posts: PostHost = { outbox, schedule };
  const turn: TurnHost = {
    get env() {
      return p.env();
    },
    get config() {
      return p.config();
    },
    live,
    store,
    context,
    records,
    outbox,
    schedule,
  };
  const flows: FlowHost = {
    get env() {
      return p.env();
    },
    get config() {
      return p.config();
    },
    store,
    records,
    outbox,
    schedule,
    admit: admitHere,
  };
  return {
    admission,
    posts,
    flows,
    lifecycle: {
      get config() {
        return p.config();
      },
      queue,
      store,
      records,
      outbox,
      waiters,
      schedule,
      get analytics() {
        return usageEvents(p.env(), p.config());
      },
      fetchMedia: (spec, runId) =>
        ingestMedia(
          { env: p.env(), config: p.config() },
          spec.req.route,
          spec.sessionId,
          runId,
          spec.req.inputs,
          AbortSignal.timeout(MEDIA_FETCH_BUDGET_MS),
        ),
      removePreview: async (route, runId, sessionKey, messageId) => {
        const port = previewPort(route, `${runId}:reply`, sessionKey, p.config(), p.env());
        if (port && !(await port.remove(messageId)))
          console.warn(`run ${runId}: its preview could not be deleted`);
      },
      turn: (spec, runId, progress, steps) => runTurn(turn, spec, runId, progress, steps),
      noticeTools: (spec, runId, produced, appended) =>
        noticeToolActivity(turn, spec, runId, produced, appended),
      continueFlows: (runId, spec, progress, outcome) => continueFlows(flows, runId, spec, progress, outcome),
      stateChanges: (sessionKey, since) => actorSessions(p.env()).stateChanges(sessionKey, since),
    },
    commands: {
      get env() {
        return p.env();
      },
      get config() {
        return p.config();
      },
      store,
      queue,
      live,
      records,
      context,
      outbox,
      schedule,
      admit: admitHere,
      stop,
    },
    entry: {
      get config() {
        return p.config();
      },
      store,
      records,
    },
  };
}
