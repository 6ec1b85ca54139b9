/**
 * One session: its entry (`sessions.get`), a page of its transcript (`chat.history`, paged back
 * with `before`), and the operator's actions on it: send a message (`chat.send`, not
 * delivered), patch label/model/send policy (`sessions.patch`), reset (`sessions.reset`). The
 * status and transcript form a live region that refreshes while a run is in progress.
 */
import type { FC } from "hono/jsx";
import type { TranscriptMessage } from "../../transcript/message";
import { Badge, Csrf, Page, SubmitId, sessionHref, shortId, tokens, When } from "../layout";
import { Transcript } from "./transcript";

export interface SessionEntry {
  key: string;
  sessionId: string;
  kind: string;
  agentId: string;
  chatType?: string;
  channel?: string;
  lastChannel?: string;
  lastTo?: string;
  displayName?: string;
  label?: string;
  model?: string;
  modelOverride?: string;
  thinkingLevel?: string;
  verboseLevel?: string;
  sendPolicy?: string;
  runStatus?: string;
  contextTokens?: number;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  compactionCount?: number;
  createdAt?: number;
  updatedAt?: number;
  sessionStartedAt?: number;
  expiresAt?: number;
  expired?: boolean;
  spawnedBy?: string;
  transcriptPath?: string;
}

export interface TrackedRun {
  runId: string;
  status: string;
  error?: string;
}

export interface SessionData {
  entry: SessionEntry;
  messages: TranscriptMessage[];
  hasMore: boolean;
  nextBefore?: number;
  before?: number;
  /** The transcript shown (the entry's current one, or one from before a reset). */
  sessionId?: string;
  /** The seq the page is centred on (a search hit). */
  around?: number;
  run?: TrackedRun;
  liveUrl: string;
}

const ACTIVE = new Set(["queued", "running"]);

export function isActive(d: Pick<SessionData, "entry" | "run">): boolean {
  return ACTIVE.has(d.entry.runStatus ?? "") || (d.run !== undefined && ACTIVE.has(d.run.status));
}

export const SessionLive: FC<SessionData> = (d) => (
  <section
    id="session-live"
    data-live={d.liveUrl}
    data-active={isActive(d) ? "1" : "0"}
    aria-label="Transcript"
  >
    <div class="statusbar">
      <span>Run status</span>
      <Badge value={d.entry.runStatus ?? "idle"} />
      {d.run && (
        <span>
          run <code title={d.run.runId}>{shortId(d.run.runId)}</code> <Badge value={d.run.status} />
          {d.run.error && <span class="muted"> {d.run.error}</span>}
        </span>
      )}
    </div>
    {d.sessionId !== undefined && d.sessionId !== d.entry.sessionId && (
      <p class="muted">
        Transcript <code>{d.sessionId}</code>, from before a reset of this session.
      </p>
    )}
    <nav class="pager" aria-label="Transcript pages">
      {d.hasMore && d.nextBefore !== undefined && (
        <a
          href={sessionHref(d.entry.key, {
            before: String(d.nextBefore),
            ...(d.sessionId && d.sessionId !== d.entry.sessionId ? { sessionId: d.sessionId } : {}),
          })}
        >
          « Older messages
        </a>
      )}
      {(d.before !== undefined || d.around !== undefined) && (
        <a href={sessionHref(d.entry.key)}>Newest messages »</a>
      )}
    </nav>
    <Transcript messages={d.messages} />
  </section>
);

const Field: FC<{ name: string; value: unknown }> = ({ name, value }) => (
  <>
    <dt>{name}</dt>
    <dd>{value === undefined || value === null || value === "" ? <span class="muted">—</span> : value}</dd>
  </>
);

export const SessionPage: FC<SessionData & { csrf: string; notice?: string }> = (d) => {
  const e = d.entry;
  return (
    <Page title={e.label ?? e.key} section="/ui/sessions" csrf={d.csrf} notice={d.notice}>
      <h1>
        {e.label ?? e.displayName ?? "Session"} <code>{e.key}</code>
      </h1>
      <div class="grid2">
        <div class="card">
          <dl class="fields">
            <Field name="sessionId" value={<code>{e.sessionId}</code>} />
            <Field name="kind" value={`${e.kind}${e.chatType ? ` (${e.chatType})` : ""}`} />
            <Field name="agent" value={e.agentId} />
            <Field name="channel" value={e.lastChannel ?? e.channel} />
            <Field name="last to" value={e.lastTo} />
            <Field name="label" value={e.label} />
            <Field name="model" value={e.modelOverride ? `${e.modelOverride} (override)` : e.model} />
            <Field name="send policy" value={e.sendPolicy ?? "inherit"} />
            <Field
              name="thinking / verbose"
              value={`${e.thinkingLevel ?? "default"} / ${e.verboseLevel ?? "off"}`}
            />
            <Field
              name="tokens"
              value={`${tokens(e.totalTokens)} total · ${tokens(e.contextTokens)} context · ${e.compactionCount ?? 0} compaction${e.compactionCount === 1 ? "" : "s"}`}
            />
            <Field name="started" value={<When ms={e.sessionStartedAt} />} />
            <Field name="updated" value={<When ms={e.updatedAt} />} />
            <Field
              name="expires"
              value={e.expired ? <Badge value="expired" tone="b-muted" /> : <When ms={e.expiresAt} />}
            />
            {e.spawnedBy && (
              <Field name="spawned by" value={<a href={sessionHref(e.spawnedBy)}>{e.spawnedBy}</a>} />
            )}
            <Field name="export" value={<code>{e.transcriptPath}</code>} />
            <Field
              name="related"
              value={
                <>
                  <a href={`/ui/runs?${new URLSearchParams({ session: e.key })}`}>runs</a> ·{" "}
                  <a href={`/ui/deliveries?${new URLSearchParams({ session: e.key })}`}>deliveries</a>
                </>
              }
            />
          </dl>
        </div>
        <div class="card actions">
          <form method="post" action="/ui/session/send" aria-label="Send a message">
            <Csrf token={d.csrf} />
            <SubmitId />
            <input type="hidden" name="key" value={e.key} />
            <label>
              Send a message (runs in this session; the reply is not delivered to the chat)
              <textarea name="message" required maxlength={200000} />
            </label>
            <p>
              <button type="submit">Send</button>
            </p>
          </form>
          <form method="post" action="/ui/session/patch" class="row" aria-label="Session settings">
            <Csrf token={d.csrf} />
            <input type="hidden" name="key" value={e.key} />
            <label>
              Label
              <input name="label" value={e.label ?? ""} maxlength={128} />
            </label>
            <label>
              Model override
              <input name="model" value={e.modelOverride ?? ""} placeholder="default" />
            </label>
            <label>
              Send policy
              <select name="sendPolicy">
                {["inherit", "allow", "deny"].map((p) => (
                  <option value={p} selected={(e.sendPolicy ?? "inherit") === p}>
                    {p}
                  </option>
                ))}
              </select>
            </label>
            <button type="submit" class="secondary">
              Save
            </button>
          </form>
          <form
            method="post"
            action="/ui/session/reset"
            data-confirm="Reset this session? The next message starts a new sessionId."
          >
            <Csrf token={d.csrf} />
            <input type="hidden" name="key" value={e.key} />
            <button type="submit" class="danger">
              Reset session
            </button>
          </form>
        </div>
      </div>
      <h2>Transcript</h2>
      <SessionLive {...d} />
    </Page>
  );
};
