/**
 * Transcript search (`sessions.search`): a query box and the hits, best match first, each with
 * its session, role, time and excerpt (matched words marked), linking to the session page at the
 * matched message (`sessionId` and `around`, so a transcript from before a reset opens too).
 */
import type { FC } from "hono/jsx";
import type { SearchResult } from "../../views/search";
import { Page, SessionLink, sessionHref, When } from "../layout";

type SearchHit = SearchResult;

export interface SearchData {
  query: string;
  results: SearchHit[];
  nextCursor?: string;
}

/** The excerpt with its `**word**` marks as <mark>; the text itself is escaped by JSX. */
const Excerpt: FC<{ text: string }> = ({ text }) => (
  <>{text.split("**").map((part, i) => (i % 2 === 1 ? <mark>{part}</mark> : part))}</>
);

export function hitHref(hit: Pick<SearchHit, "sessionKey" | "sessionId" | "seq">): string {
  return `${sessionHref(hit.sessionKey, { sessionId: hit.sessionId, around: String(hit.seq) })}#m${hit.seq}`;
}

export const SearchPage: FC<{ data?: SearchData; csrf: string }> = ({ data, csrf }) => (
  <Page title="Search" section="/ui/search" csrf={csrf}>
    <h1>Search transcripts</h1>
    <search>
      <form method="get" action="/ui/search" class="filters">
        <input
          name="q"
          type="search"
          value={data?.query ?? ""}
          placeholder='words, or "a phrase"'
          aria-label="Search transcripts"
          maxlength={200}
          required
        />
        <button type="submit">Search</button>
      </form>
    </search>
    {data &&
      (data.results.length === 0 ? (
        <p class="card empty">No message matches {JSON.stringify(data.query)}.</p>
      ) : (
        <ol class="hits" aria-label="Search results">
          {data.results.map((h) => (
            <li class="hit">
              <div class="muted small">
                <SessionLink sessionKey={h.sessionKey} /> · {h.role} · #{h.seq} · <When ms={h.timestamp} />
              </div>
              <a class="excerpt" href={hitHref(h)}>
                <Excerpt text={h.excerpt} />
              </a>
            </li>
          ))}
        </ol>
      ))}
    {data?.nextCursor && (
      <nav class="pager" aria-label="Result pages">
        <a href={`/ui/search?${new URLSearchParams({ q: data.query, cursor: data.nextCursor })}`}>
          More results »
        </a>
      </nav>
    )}
  </Page>
);
