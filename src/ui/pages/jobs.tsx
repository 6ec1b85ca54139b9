/** The scheduled jobs page (`cron.list`): each job's schedule, next run and last run. */
import type { FC } from "hono/jsx";
import { Badge, Page, SessionLink, Table, When } from "../layout";

export interface JobRow {
  id: string;
  schedule: string;
  timezone: string;
  agentId: string;
  isolated: boolean;
  deliver?: { channel: string; to: string };
  sessionKey: string;
  nextRunAt: number | null;
  lastRun: {
    scheduledFor: number;
    runId: string;
    late: boolean;
    skipped?: string;
    status?: string;
    endedAt?: number;
    error?: string;
  } | null;
}

export const JobsPage: FC<{ jobs: JobRow[]; csrf: string }> = ({ jobs, csrf }) => (
  <Page title="Scheduled jobs" section="/ui/jobs" csrf={csrf}>
    <h1>Scheduled jobs</h1>
    <Table
      label="Scheduled jobs"
      head={["Job", "Schedule", "Agent", "Next run", "Last run", "Last status", "Session"]}
      rows={jobs.length}
      empty="No scheduled jobs: add them under cron.jobs in SWITCHBOARD_CONFIG."
    >
      {jobs.map((j) => (
        <tr>
          <td class="nowrap">
            <strong>{j.id}</strong>
            <div class="muted small">
              {j.isolated ? "isolated" : "shared session"}
              {j.deliver ? ` · delivers to ${j.deliver.channel}: ${j.deliver.to}` : ""}
            </div>
          </td>
          <td class="nowrap">
            <code>{j.schedule}</code> <span class="muted small">{j.timezone}</span>
          </td>
          <td>{j.agentId}</td>
          <td class="nowrap">
            <When ms={j.nextRunAt} />
          </td>
          <td class="nowrap">
            {j.lastRun ? <When ms={j.lastRun.scheduledFor} /> : <span class="muted">never</span>}
            {j.lastRun?.late && <Badge value="late" tone="b-warn" />}
          </td>
          <td class="wrap">
            {j.lastRun?.skipped ? (
              <>
                <Badge value="skipped" tone="b-warn" /> {j.lastRun.skipped}
              </>
            ) : j.lastRun?.status ? (
              <>
                <Badge value={j.lastRun.status} /> {j.lastRun.error ?? ""}
              </>
            ) : (
              "—"
            )}
          </td>
          <td class="wrap">
            <SessionLink sessionKey={j.sessionKey} />
          </td>
        </tr>
      ))}
    </Table>
  </Page>
);
