/**
 * A run's page (`runs.get`, SPEC §21): its status, session, trigger, model, usage and cost, the
 * cause of an error, and its timeline drawn as a waterfall (views/timeline-chart.ts, SVG made on
 * the server) with the same spans as a table.
 */
import { raw } from "hono/html";
import type { FC } from "hono/jsx";
import type { TimelineSpan } from "../../transcript/message";
import { formatUsd, formatUsdExact } from "../../views/format";
import { spanDuration, spanLabel, timelineSvg } from "../../views/timeline-chart";
import { Badge, duration, Page, SessionLink, Table, tokens, When } from "../layout";

export interface RunDetail {
  runId: string;
  sessionKey: string;
  sessionId: string;
  trigger: string;
  status: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
  model?: string;
  usage?: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens?: number;
    cacheWriteTokens?: number;
    modelCalls?: number;
    unpricedCalls?: number;
  };
  costUsd?: number | null;
  deliver?: boolean;
  delivered?: boolean;
  timeline: TimelineSpan[];
}

const Cost: FC<{ run: RunDetail }> = ({ run }) =>
  run.costUsd === undefined ? (
    <>—</>
  ) : run.costUsd === null ? (
    <span class="muted">unpriced</span>
  ) : (
    <span title={formatUsdExact(run.costUsd)} data-usd={String(run.costUsd)}>
      {formatUsd(run.costUsd)}
    </span>
  );

export const RunPage: FC<{ run: RunDetail; csrf: string }> = ({ run, csrf }) => {
  const u = run.usage;
  return (
    <Page title={`Run ${run.runId}`} section="/ui/runs" csrf={csrf}>
      <h1>
        Run <code>{run.runId}</code> <Badge value={run.status} />
      </h1>
      <dl class="fields card">
        <dt>Session</dt>
        <dd>
          <SessionLink sessionKey={run.sessionKey} />
        </dd>
        <dt>Trigger</dt>
        <dd>{run.trigger}</dd>
        <dt>Created</dt>
        <dd>
          <When ms={run.createdAt} />
        </dd>
        <dt>Duration</dt>
        <dd>
          {run.startedAt === undefined
            ? "not started"
            : run.endedAt === undefined
              ? "running"
              : duration(run.endedAt - run.startedAt)}
        </dd>
        <dt>Model</dt>
        <dd>{run.model ?? "—"}</dd>
        <dt>Tokens</dt>
        <dd>
          {u
            ? `${tokens(u.inputTokens)} in / ${tokens(u.outputTokens)} out` +
              (u.cacheReadTokens || u.cacheWriteTokens
                ? ` (cache ${tokens(u.cacheReadTokens ?? 0)} read, ${tokens(u.cacheWriteTokens ?? 0)} written)`
                : "") +
              (u.modelCalls !== undefined ? ` · ${u.modelCalls} model calls` : "")
            : "—"}
        </dd>
        <dt>Cost</dt>
        <dd data-field="cost">
          <Cost run={run} />
        </dd>
        <dt>Delivered</dt>
        <dd>{run.deliver ? (run.delivered ? "yes" : run.delivered === false ? "no" : "pending") : "—"}</dd>
        {run.error && (
          <>
            <dt>Error</dt>
            <dd class="wrap">{run.error}</dd>
          </>
        )}
      </dl>

      <section aria-label="Timeline">
        <h2>Timeline</h2>
        <figure class="card chart">{raw(timelineSvg(run.timeline, run.createdAt))}</figure>
        <Table
          label="Timeline spans"
          head={["Span", "Starts at", "Took", "Outcome"]}
          rows={run.timeline.length}
          empty=""
        >
          {run.timeline.map((s) => (
            <tr data-phase={s.phase}>
              <td class="nowrap">{spanLabel(s)}</td>
              <td class="num">+{spanDuration(s.startedAt - run.createdAt)}</td>
              <td class="num" data-ms={String(s.ms)}>
                {spanDuration(s.ms)}
              </td>
              <td>{s.outcome ?? ""}</td>
            </tr>
          ))}
        </Table>
      </section>
    </Page>
  );
};
