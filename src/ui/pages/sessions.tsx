/**
 * The sessions page: the session index newest first (`sessions.list`), filtered by kind, agent,
 * label and channel, keyset-paged, with each session's run status; a form that sends a message
 * to an agent (`agent`, not delivered).
 */
import type { FC } from "hono/jsx";
import { SESSION_KINDS } from "../../views/session-page";
import { Badge, Choice, Csrf, Page, Pager, SessionLink, SubmitId, Table, tokens, When } from "../layout";

export interface SessionListRow {
  key: string;
  kind: string;
  channel: string;
  agentId: string;
  label?: string;
  displayName?: string;
  model?: string;
  totalTokens?: number;
  updatedAt: number;
  runStatus?: string;
  expired?: boolean;
  archivedAt?: number;
}

export interface SessionsFilter {
  kind?: string;
  agent?: string;
  label?: string;
  channel?: string;
  cursor?: string;
}

export interface SessionsData {
  filter: SessionsFilter;
  sessions: SessionListRow[];
  nextCursor?: string;
  agents: string[];
  /** The URL of this page's live fragment. */
  liveUrl: string;
}

const ACTIVE = new Set(["queued", "running"]);

export const SessionsTable: FC<SessionsData> = ({ sessions, liveUrl }) => (
  <div
    id="sessions-live"
    data-live={liveUrl}
    data-active={sessions.some((s) => ACTIVE.has(s.runStatus ?? "")) ? "1" : "0"}
  >
    <Table
      label="Sessions"
      head={["Session", "Status", "Kind", "Channel", "Agent", "Model", "Tokens", "Updated"]}
      rows={sessions.length}
      empty="No sessions match."
    >
      {sessions.map((s) => (
        <tr>
          <td class="wrap">
            {(s.label || s.displayName) && (
              <div>
                <strong>{s.label ?? s.displayName}</strong>
              </div>
            )}
            <SessionLink sessionKey={s.key} />
          </td>
          <td class="nowrap">
            <Badge value={s.runStatus ?? "idle"} /> {s.expired && <Badge value="expired" tone="b-muted" />}{" "}
            {s.archivedAt !== undefined && <Badge value="archived" tone="b-muted" />}
          </td>
          <td>{s.kind}</td>
          <td>{s.channel}</td>
          <td>{s.agentId}</td>
          <td class="nowrap">{s.model ?? <span class="muted">—</span>}</td>
          <td class="num">{tokens(s.totalTokens)}</td>
          <td class="nowrap">
            <When ms={s.updatedAt} />
          </td>
        </tr>
      ))}
    </Table>
  </div>
);

export const SessionsPage: FC<SessionsData & { csrf: string; notice?: string }> = (props) => {
  const f = props.filter;
  return (
    <Page title="Sessions" section="/ui/sessions" csrf={props.csrf} notice={props.notice}>
      <h1>Sessions</h1>
      <form class="filters" method="get" action="/ui/sessions" aria-label="Filter sessions">
        <Choice name="kind" label="Kind" value={f.kind} options={SESSION_KINDS} />
        <Choice name="agent" label="Agent" value={f.agent} options={props.agents} />
        <label>
          Label
          <input name="label" value={f.label ?? ""} placeholder="exact label" />
        </label>
        <label>
          Channel
          <input name="channel" value={f.channel ?? ""} placeholder="telegram, internal…" />
        </label>
        <button type="submit">Filter</button>
        <a href="/ui/sessions" class="small">
          Clear
        </a>
      </form>
      <SessionsTable {...props} />
      <Pager
        base="/ui/sessions"
        params={{ kind: f.kind, agent: f.agent, label: f.label, channel: f.channel, cursor: f.cursor }}
        nextCursor={props.nextCursor}
      />
      <h2>Message an agent</h2>
      <form class="card row" method="post" action="/ui/agent" aria-label="Message an agent">
        <Csrf token={props.csrf} />
        <SubmitId />
        <Choice name="agentId" label="Agent" options={props.agents} any="default agent" />
        <label class="grow">
          Message (runs in the agent's main session; the reply is not delivered to a chat)
          <input name="message" required maxlength={200000} />
        </label>
        <button type="submit">Send</button>
      </form>
    </Page>
  );
};
