/**
 * The runs page (`runs.list`): newest first, filtered by status and session, keyset-paged; each
 * run's status, trigger, duration, tokens, model, delivery and the cause of an error; its id
 * opens the run's page (pages/run.tsx, with its timeline).
 */
import type { FC } from "hono/jsx";
import { Badge, Choice, duration, Page, Pager, SessionLink, shortId, Table, tokens, When } from "../layout";

export interface RunRow {
  runId: string;
  sessionKey: string;
  trigger: string;
  status: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  model?: string;
  usage?: { totalTokens?: number };
  deliver?: boolean;
  delivered?: boolean;
}

export interface RunsData {
  filter: { status?: string; session?: string; cursor?: string };
  runs: RunRow[];
  nextCursor?: string;
  liveUrl: string;
}

export const RUN_STATUSES = [
  "queued",
  "running",
  "ok",
  "error",
  "aborted",
  "timeout",
  "budget_exceeded",
] as const;
const ACTIVE = new Set(["queued", "running"]);

function runDuration(r: RunRow): string {
  if (r.startedAt === undefined) return "—";
  if (r.endedAt === undefined) return "running";
  return duration(r.endedAt - r.startedAt);
}

export const RunsTable: FC<RunsData> = ({ runs, liveUrl }) => (
  <div id="runs-live" data-live={liveUrl} data-active={runs.some((r) => ACTIVE.has(r.status)) ? "1" : "0"}>
    <Table
      label="Runs"
      head={[
        "Created",
        "Status",
        "Run",
        "Session",
        "Trigger",
        "Duration",
        "Tokens",
        "Model",
        "Delivered",
        "Error",
      ]}
      rows={runs.length}
      empty="No runs match."
    >
      {runs.map((r) => (
        <tr>
          <td class="nowrap">
            <When ms={r.createdAt} />
          </td>
          <td>
            <Badge value={r.status} />
          </td>
          <td class="nowrap">
            <a href={`/ui/run?${new URLSearchParams({ id: r.runId })}`} title={r.runId}>
              <code>{shortId(r.runId)}</code>
            </a>
          </td>
          <td class="wrap">
            <SessionLink sessionKey={r.sessionKey} />
          </td>
          <td>{r.trigger}</td>
          <td class="num">{runDuration(r)}</td>
          <td class="num">{tokens(r.usage?.totalTokens)}</td>
          <td class="nowrap">{r.model ?? "—"}</td>
          <td>{r.deliver ? (r.delivered ? "yes" : r.delivered === false ? "no" : "pending") : "—"}</td>
          <td class="wrap">{r.error ?? ""}</td>
        </tr>
      ))}
    </Table>
  </div>
);

export const RunsPage: FC<RunsData & { csrf: string }> = (props) => {
  const f = props.filter;
  return (
    <Page title="Runs" section="/ui/runs" csrf={props.csrf}>
      <h1>Runs</h1>
      <form class="filters" method="get" action="/ui/runs" aria-label="Filter runs">
        <Choice name="status" label="Status" value={f.status} options={RUN_STATUSES} />
        <label class="grow">
          Session key
          <input name="session" value={f.session ?? ""} placeholder="agent:main:main" />
        </label>
        <button type="submit">Filter</button>
        <a href="/ui/runs" class="small">
          Clear
        </a>
      </form>
      <RunsTable {...props} />
      <Pager
        base="/ui/runs"
        params={{ status: f.status, session: f.session, cursor: f.cursor }}
        nextCursor={props.nextCursor}
      />
    </Page>
  );
};
