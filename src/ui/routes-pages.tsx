/**
 * The dashboard's pages (GET, logged in): each reads through operator RPC methods and renders;
 * `?fragment=live` answers only the page's live region (what the script polls while a run is
 * in progress).
 */
import { Hono } from "hono";
import { loadConfig } from "../config/load";
import { mediaBucket, mediaResponse } from "../db/media-store";
import { ApiError } from "../http/errors";
import type { TranscriptMessage } from "../transcript/message";
import { daysInRange, isCalendarDay } from "../views/cost-chart";
import { HOME } from "./auth";
import { liveUrl, query, queryInt, rpc, type UiEnv, wantsFragment } from "./context";
import { AuditPage, type AuditReport } from "./pages/audit";
import { DeliveriesPage, type DeliveryRow } from "./pages/deliveries";
import { type JobRow, JobsPage } from "./pages/jobs";
import { type ApprovedSender, PairingPage, type PendingCode } from "./pages/pairing";
import { type RunDetail, RunPage } from "./pages/run";
import { type RunRow, RunsPage, RunsTable } from "./pages/runs";
import { type SearchData, SearchPage } from "./pages/search";
import { type SessionEntry, SessionLive, SessionPage, type TrackedRun } from "./pages/session";
import { type SessionListRow, SessionsPage, SessionsTable } from "./pages/sessions";
import { type UsageData, UsagePage, type UsageSummary } from "./pages/usage";

const PAGE_SIZE = 50;
const TRANSCRIPT_PAGE = 50;
/** Rows in each of the Usage page's top tables. */
const USAGE_TOP = 10;
/** The longest range the Usage page draws: a year, a leap one included (a bar a day). */
const USAGE_MAX_DAYS = 366;

export const pages = new Hono<UiEnv>()
  .get("/", (c) => c.redirect(HOME, 303))

  .get("/sessions", async (c) => {
    const filter = {
      kind: query(c, "kind"),
      agent: query(c, "agent"),
      label: query(c, "label"),
      channel: query(c, "channel"),
      cursor: query(c, "cursor"),
    };
    const list = await rpc<{ sessions: SessionListRow[]; nextCursor?: string }>(c, "sessions.list", {
      limit: PAGE_SIZE,
      ...(filter.kind ? { kinds: [filter.kind] } : {}),
      ...(filter.agent ? { agentId: filter.agent } : {}),
      ...(filter.label ? { label: filter.label } : {}),
      ...(filter.channel ? { channel: filter.channel } : {}),
      ...(filter.cursor ? { cursor: filter.cursor } : {}),
    });
    const data = { filter, ...list, liveUrl: liveUrl(c), agents: [] as string[] };
    if (wantsFragment(c)) return c.html(<SessionsTable {...data} />);
    const agents = await rpc<{ agents: Array<{ id: string }> }>(c, "agents.list");
    data.agents = agents.agents.map((a) => a.id);
    return c.html(<SessionsPage {...data} csrf={c.get("csrfToken")} notice={query(c, "notice")} />);
  })

  .get("/session", async (c) => {
    const key = query(c, "key");
    if (!key) throw new ApiError("INVALID_REQUEST", "`key` is required: the session key to show");
    const before = queryInt(c, "before");
    if (before === 0) throw new ApiError("INVALID_REQUEST", "`before` must be a seq of 1 or more");
    // A search hit: a transcript of this key (maybe from before a reset), around a seq.
    const sessionId = query(c, "sessionId");
    const around = queryInt(c, "around");
    if (around === 0) throw new ApiError("INVALID_REQUEST", "`around` must be a seq of 1 or more");
    const runId = query(c, "run");
    const [entry, history, run] = await Promise.all([
      rpc<SessionEntry>(c, "sessions.get", { key }),
      rpc<{ messages: TranscriptMessage[]; hasMore: boolean; nextBefore?: number; sessionId: string }>(
        c,
        "chat.history",
        {
          sessionKey: key,
          limit: TRANSCRIPT_PAGE,
          includeTools: true,
          ...(before ? { before } : {}),
          ...(sessionId ? { sessionId } : {}),
          ...(around ? { aroundSeq: around } : {}),
        },
      ),
      runId ? trackedRun(c, runId) : undefined,
    ]);
    const data = { entry, ...history, before, around, run, liveUrl: liveUrl(c) };
    if (wantsFragment(c)) return c.html(<SessionLive {...data} />);
    return c.html(<SessionPage {...data} csrf={c.get("csrfToken")} notice={query(c, "notice")} />);
  })

  .get("/search", async (c) => {
    const q = query(c, "q");
    const cursor = query(c, "cursor");
    const data = q
      ? await rpc<SearchData>(c, "sessions.search", {
          query: q.slice(0, 200),
          limit: PAGE_SIZE,
          archived: "all",
          ...(cursor ? { cursor } : {}),
        })
      : undefined;
    return c.html(<SearchPage data={data} csrf={c.get("csrfToken")} />);
  })

  .get("/runs", async (c) => {
    const filter = { status: query(c, "status"), session: query(c, "session"), cursor: query(c, "cursor") };
    const list = await rpc<{ runs: RunRow[]; nextCursor?: string }>(c, "runs.list", {
      limit: PAGE_SIZE,
      ...(filter.status ? { status: filter.status } : {}),
      ...(filter.session ? { sessionKey: filter.session } : {}),
      ...(filter.cursor ? { cursor: filter.cursor } : {}),
    });
    const data = { filter, ...list, liveUrl: liveUrl(c) };
    if (wantsFragment(c)) return c.html(<RunsTable {...data} />);
    return c.html(<RunsPage {...data} csrf={c.get("csrfToken")} />);
  })

  .get("/run", async (c) => {
    const runId = query(c, "id");
    if (!runId) throw new ApiError("INVALID_REQUEST", "`id` is required: the run id to show");
    const run = await rpc<RunDetail>(c, "runs.get", { runId });
    return c.html(<RunPage run={run} csrf={c.get("csrfToken")} />);
  })

  .get("/deliveries", async (c) => {
    const filter = { status: query(c, "status"), session: query(c, "session"), cursor: query(c, "cursor") };
    const list = await rpc<{ deliveries: DeliveryRow[]; nextCursor?: string }>(c, "deliveries.list", {
      limit: PAGE_SIZE,
      ...(filter.status ? { status: filter.status } : {}),
      ...(filter.session ? { sessionKey: filter.session } : {}),
      ...(filter.cursor ? { cursor: filter.cursor } : {}),
    });
    const url = new URL(c.req.url);
    url.searchParams.delete("notice");
    return c.html(
      <DeliveriesPage
        filter={filter}
        {...list}
        here={`${url.pathname}${url.search}`}
        csrf={c.get("csrfToken")}
        notice={query(c, "notice")}
      />,
    );
  })

  .get("/usage", async (c) => {
    const range: Record<string, string> = {};
    for (const name of ["from", "to"] as const) {
      const day = query(c, name);
      if (day === undefined) continue;
      // The RPC checks the shape; a day like 2025-02-30 has it, and would be rolled over here.
      if (/^\d{4}-\d\d-\d\d$/.test(day) && !isCalendarDay(day)) {
        throw new ApiError("INVALID_REQUEST", `\`${name}\` must be a calendar day, YYYY-MM-DD (got ${day})`);
      }
      range[name] = day;
    }
    // Four reads of the daily rollup, at once; each total is the whole range's (before `limit`).
    const summary = (groupBy: string, limit: number) =>
      rpc<UsageSummary>(c, "usage.summary", { ...range, groupBy, limit });
    const [days, sessions, agents, models] = await Promise.all([
      summary("day", USAGE_MAX_DAYS),
      summary("session", USAGE_TOP),
      summary("agent", USAGE_TOP),
      summary("model", USAGE_TOP),
    ]);
    const span = daysInRange(days.from, days.to).length;
    if (span > USAGE_MAX_DAYS) {
      throw new ApiError(
        "INVALID_REQUEST",
        `the range is at most ${USAGE_MAX_DAYS} days (got ${span}, ${days.from} to ${days.to}): pick a later \`from\` or an earlier \`to\``,
      );
    }
    const data: UsageData = { days, sessions, agents, models };
    return c.html(<UsagePage data={data} csrf={c.get("csrfToken")} />);
  })

  // A file of a transcript (SPEC §22), for the session page's images and audio.
  .get("/media/:mediaId", async (c) => {
    const mediaId = c.req.param("mediaId");
    const bucket = mediaBucket(c.env, loadConfig(c.env));
    const res = bucket ? await mediaResponse(bucket, mediaId) : undefined;
    if (!res) throw new ApiError("NOT_FOUND", `media not found: ${mediaId}`);
    return res;
  })

  .get("/jobs", async (c) => {
    const { jobs } = await rpc<{ jobs: JobRow[] }>(c, "cron.list");
    return c.html(<JobsPage jobs={jobs} csrf={c.get("csrfToken")} />);
  })

  .get("/pairing", async (c) => {
    const list = await rpc<{ pending: PendingCode[]; approved: ApprovedSender[] }>(c, "pairing.list");
    return c.html(<PairingPage {...list} csrf={c.get("csrfToken")} notice={query(c, "notice")} />);
  })

  .get("/audit", async (c) => {
    const report = await rpc<AuditReport>(c, "security.audit");
    return c.html(<AuditPage report={report} csrf={c.get("csrfToken")} />);
  });

/** The run a page follows after a send: a run not recorded yet counts as queued. */
async function trackedRun(c: Parameters<typeof rpc>[0], runId: string): Promise<TrackedRun> {
  try {
    return await rpc<TrackedRun>(c, "runs.get", { runId });
  } catch (error) {
    if (error instanceof ApiError && error.code === "NOT_FOUND") return { runId, status: "queued" };
    throw error;
  }
}
