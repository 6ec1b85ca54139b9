/**
 * The dashboard's page frame (head, nav bar, logout form) and the small pieces every page
 * uses: badges, instants, durations, notices, pagers, hidden CSRF fields. Server-rendered with
 * hono/jsx, which escapes every interpolated value.
 */
import type { Child, FC, PropsWithChildren } from "hono/jsx";
import { VERSION } from "../version";
import { formatTokens } from "../views/format";
import { CSRF_FIELD } from "./auth";

export const NAV = [
  ["/ui/sessions", "Sessions"],
  ["/ui/search", "Search"],
  ["/ui/runs", "Runs"],
  ["/ui/usage", "Usage"],
  ["/ui/deliveries", "Deliveries"],
  ["/ui/jobs", "Jobs"],
  ["/ui/pairing", "Pairing"],
  ["/ui/audit", "Audit"],
] as const;

/** What a POST of a page came back with (fixed texts by code, so a link cannot inject text). */
export const NOTICES: Record<string, string> = {
  sent: "Message queued; the reply appears below when the run ends.",
  reset: "Session reset: the next message starts a new sessionId.",
  patched: "Settings saved.",
  retried: "Delivery queued again for a fresh round of attempts.",
  "retry-noop": "That delivery is still owed (pending or retrying): nothing to retry.",
  approved: "Sender approved: their next message runs.",
  revoked: "Sender revoked: their next message gets a new pairing code.",
};

export interface PageProps {
  title: string;
  /** The nav entry to mark current. */
  section?: string;
  /** The login's CSRF token; absent on the login and error pages shown before login. */
  csrf?: string;
  notice?: string;
}

const Head: FC<{ title: string }> = ({ title }) => (
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="same-origin" />
    <title>{`${title} · Switchboard`}</title>
    <link rel="stylesheet" href={`/ui/assets/style.css?v=${VERSION}`} />
    <script src={`/ui/assets/app.js?v=${VERSION}`} defer />
  </head>
);

export const Page: FC<PropsWithChildren<PageProps>> = ({ title, section, csrf, notice, children }) => (
  <html lang="en">
    <Head title={title} />
    <body>
      <header class="top">
        <a class="brand" href="/ui/sessions">
          Switchboard
        </a>
        {csrf !== undefined && (
          <>
            <nav aria-label="Main">
              {NAV.map(([href, label]) => (
                <a href={href} aria-current={section === href ? "page" : undefined}>
                  {label}
                </a>
              ))}
            </nav>
            <form method="post" action="/ui/logout">
              <Csrf token={csrf} />
              <button type="submit" class="small">
                Log out
              </button>
            </form>
          </>
        )}
      </header>
      <main>
        {notice && NOTICES[notice] && (
          <p class="notice" role="status">
            {NOTICES[notice]}
          </p>
        )}
        {children}
      </main>
    </body>
  </html>
);

export const Csrf: FC<{ token: string }> = ({ token }) => (
  <input type="hidden" name={CSRF_FIELD} value={token} />
);

/** One button that POSTs `fields` (and the CSRF token) to a dashboard action. */
export const ActionButton: FC<{
  action: string;
  csrf: string;
  fields: Record<string, string>;
  label: string;
}> = ({ action, csrf, fields, label }) => (
  <form method="post" action={action}>
    <Csrf token={csrf} />
    {Object.entries(fields).map(([name, value]) => (
      <input type="hidden" name={name} value={value} />
    ))}
    <button type="submit" class="small">
      {label}
    </button>
  </form>
);

/**
 * A form's one-time id, sent as the run's idempotency key: a form submitted twice (a double
 * click, a resubmitted POST) queues one run.
 */
export const SubmitId: FC = () => <input type="hidden" name="submitId" value={crypto.randomUUID()} />;

const TONES: Record<string, string> = {
  ok: "b-ok",
  delivered: "b-ok",
  idle: "b-muted",
  queued: "b-live",
  running: "b-live",
  pending: "b-info",
  retrying: "b-warn",
  timeout: "b-warn",
  aborted: "b-warn",
  error: "b-bad",
  dead: "b-bad",
  high: "b-bad",
  medium: "b-warn",
  low: "b-info",
  info: "b-muted",
};

export const Badge: FC<{ value: string; tone?: string }> = ({ value, tone }) => (
  <span class={`badge ${tone ?? TONES[value] ?? "b-muted"}`}>{value}</span>
);

/** An instant in UTC (the script shows it in the browser's zone). */
export const When: FC<{ ms: unknown }> = ({ ms }) => {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return <span class="muted">—</span>;
  const iso = new Date(ms).toISOString();
  return <time datetime={iso}>{`${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`}</time>;
};

export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return s < 3600
    ? `${Math.floor(s / 60)}m ${s % 60}s`
    : `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export function tokens(n: unknown): string {
  return typeof n === "number" && n > 0 ? formatTokens(n) : "—";
}

export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 8)}…` : id;
}

export function sessionHref(key: string, extra: Record<string, string> = {}): string {
  return `/ui/session?${new URLSearchParams({ key, ...extra })}`;
}

/** A session key that wraps at its `:` separators rather than mid-word. */
export const KeyText: FC<{ value: string }> = ({ value }) => (
  <>
    {value.split(":").map((part, i) => (
      <>
        {i > 0 && (
          <>
            :<wbr />
          </>
        )}
        {part}
      </>
    ))}
  </>
);

export const SessionLink: FC<{ sessionKey: string; text?: string }> = ({ sessionKey, text }) => (
  <a href={sessionHref(sessionKey)} class="mono key">
    {text ?? <KeyText value={sessionKey} />}
  </a>
);

/** The link to the next page of a keyset-paged list, and back to the first page. */
export const Pager: FC<{ base: string; params: Record<string, string | undefined>; nextCursor?: string }> = ({
  base,
  params,
  nextCursor,
}) => {
  const kept = Object.entries(params).filter((e): e is [string, string] => !!e[1] && e[0] !== "cursor");
  const first = `${base}${kept.length ? `?${new URLSearchParams(kept)}` : ""}`;
  return (
    <nav class="pager" aria-label="Pages">
      {params.cursor && <a href={first}>« Newest</a>}
      {nextCursor && (
        <a href={`${base}?${new URLSearchParams([...kept, ["cursor", nextCursor]])}`}>Older »</a>
      )}
    </nav>
  );
};

export const Table: FC<PropsWithChildren<{ head: string[]; empty: string; rows: number; label: string }>> = ({
  head,
  empty,
  rows,
  label,
  children,
}) => (
  <div class="table-wrap">
    <table aria-label={label}>
      <thead>
        <tr>
          {head.map((h) => (
            <th scope="col">{h}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows === 0 ? (
          <tr>
            <td class="empty" colspan={head.length}>
              {empty}
            </td>
          </tr>
        ) : (
          children
        )}
      </tbody>
    </table>
  </div>
);

/** A select whose first option means "any". */
export const Choice: FC<{
  name: string;
  label: string;
  value?: string;
  options: readonly string[];
  any?: string;
}> = ({ name, label, value, options, any = "any" }) => (
  <label>
    {label}
    <select name={name}>
      <option value="">{any}</option>
      {options.map((o) => (
        <option value={o} selected={o === value}>
          {o}
        </option>
      ))}
    </select>
  </label>
);

export type Children = Child;
