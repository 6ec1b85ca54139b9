/**
 * The Usage page (SPEC §21, `usage.summary`): for a range of days in `session.timezone` (the
 * last 30 by default), the daily cost chart (src/views/cost-chart.ts, SVG drawn on the server),
 * the range's totals, and its top sessions, agents and models by cost. A cost no call could be
 * priced for reads "—, unpriced", never $0.
 */

import { raw } from "hono/html";
import type { Child, FC } from "hono/jsx";
import { allUnpriced, costChartSvg } from "../../views/cost-chart";
import { formatCount, formatUsd, formatUsdExact } from "../../views/format";
import { Page, SessionLink, Table } from "../layout";

/** The figures of one row of `usage.summary`, and of its total. */
export interface UsageFigures {
  runs: number;
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Null when every model call was unpriced. */
  costUsd: number | null;
  unpricedCalls: number;
}

export type UsageRow = UsageFigures & { group: string };

/** What `usage.summary` answers. */
export interface UsageSummary {
  from: string;
  to: string;
  timezone: string;
  rows: UsageRow[];
  /** How many rows past `limit` were left out. */
  more?: number;
  total: UsageFigures;
}

export interface UsageData {
  /** groupBy "day": the chart, and the range's total. */
  days: UsageSummary;
  sessions: UsageSummary;
  agents: UsageSummary;
  models: UsageSummary;
}

/** A cost: rounded as elsewhere, the exact figure in its tooltip, and the calls without a price. */
export const Cost: FC<{ u: UsageFigures }> = ({ u }) => {
  if (u.costUsd === null || allUnpriced(u)) {
    return (
      <span title={`${formatCount(u.unpricedCalls)} model calls, none priced`}>
        <span class="usd">—</span> <span class="muted small">unpriced</span>
      </span>
    );
  }
  return (
    <span title={formatUsdExact(u.costUsd)} data-usd={String(u.costUsd)}>
      <span class="usd">{formatUsd(u.costUsd)}</span>
      {u.unpricedCalls > 0 && <span class="muted small"> + {formatCount(u.unpricedCalls)} unpriced</span>}
    </span>
  );
};

const FIGURE_HEAD = [
  "Runs",
  "Model calls",
  "Input tokens",
  "Output tokens",
  "Cache read",
  "Cache write",
  "Cost",
];

const Figures: FC<{ u: UsageFigures }> = ({ u }) => (
  <>
    <td class="num" data-field="runs">
      {formatCount(u.runs)}
    </td>
    <td class="num">{formatCount(u.modelCalls)}</td>
    <td class="num">{formatCount(u.inputTokens)}</td>
    <td class="num">{formatCount(u.outputTokens)}</td>
    <td class="num">{formatCount(u.cacheReadTokens)}</td>
    <td class="num">{formatCount(u.cacheWriteTokens)}</td>
    <td class="num" data-field="cost">
      <Cost u={u} />
    </td>
  </>
);

/** One "top" table: the summary's rows (largest cost first), each named by `name`. */
const TopTable: FC<{
  title: string;
  what: string;
  summary: UsageSummary;
  name: (group: string) => Child;
}> = ({ title, what, summary, name }) => (
  <section aria-label={title}>
    <h2>{title}</h2>
    <Table
      label={title}
      head={[what, ...FIGURE_HEAD]}
      rows={summary.rows.length}
      empty="No usage in this range."
    >
      {summary.rows.map((r) => (
        <tr>
          <td class="wrap">{name(r.group)}</td>
          <Figures u={r} />
        </tr>
      ))}
    </Table>
    {summary.more !== undefined && (
      <p class="muted small">
        {formatCount(summary.more)} more {what.toLowerCase()}s with less cost are not shown.
      </p>
    )}
  </section>
);

export const UsagePage: FC<{ data: UsageData; csrf: string }> = ({ data, csrf }) => {
  const { days } = data;
  const total = days.total;
  const unpricedDays = days.rows.some(allUnpriced);
  return (
    <Page title="Usage" section="/ui/usage" csrf={csrf}>
      <h1>Usage</h1>
      <form class="filters" method="get" action="/ui/usage" aria-label="Usage range">
        <label>
          From
          <input type="date" name="from" value={days.from} />
        </label>
        <label>
          To
          <input type="date" name="to" value={days.to} />
        </label>
        <button type="submit">Show</button>
        <a href="/ui/usage" class="small">
          Last 30 days
        </a>
      </form>
      <p class="muted small">
        {days.from} to {days.to}, days in {days.timezone}. Costs are US dollars of the priced model calls; a
        call of a model with no price counts as unpriced, not as $0.
      </p>

      <section aria-label="Daily cost">
        <h2>Daily cost</h2>
        <figure class="card chart">
          {raw(costChartSvg(days.from, days.to, days.rows))}
          {unpricedDays && (
            <figcaption class="muted small">
              <span class="swatch-unpriced" aria-hidden="true" /> unpriced: every model call of that day was
              of a model with no price (see models.pricing).
            </figcaption>
          )}
        </figure>
      </section>

      <section aria-label="Totals">
        <h2>Totals</h2>
        <Table label="Totals" head={[...FIGURE_HEAD, "Unpriced calls"]} rows={1} empty="">
          <tr>
            <Figures u={total} />
            <td class="num">{formatCount(total.unpricedCalls)}</td>
          </tr>
        </Table>
      </section>

      <TopTable
        title="Top sessions"
        what="Session"
        summary={data.sessions}
        name={(key) => <SessionLink sessionKey={key} />}
      />
      <TopTable
        title="Top agents"
        what="Agent"
        summary={data.agents}
        name={(id) => <a href={`/ui/sessions?${new URLSearchParams({ agent: id })}`}>{id}</a>}
      />
      <TopTable
        title="Top models"
        what="Model"
        summary={data.models}
        name={(model) => (model ? <code>{model}</code> : <span class="muted">no model</span>)}
      />
    </Page>
  );
};
