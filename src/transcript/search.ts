/**
 * Transcript search's text rules (SPEC §20 `sessions_search`), pure: a user's query made into an
 * SQLite FTS5 match expression that is never a syntax error, and the excerpt of a hit with its
 * matched words marked. Words are what FTS5's `unicode61 remove_diacritics 2` tokenizer makes of
 * a text (runs of letters, digits and private-use characters) and match case- and
 * diacritic-insensitively; `"quoted words"` are a phrase; every other character is text.
 */

/** Runs of letters, numbers and private-use characters: unicode61's tokens. */
const WORD = /[\p{L}\p{N}\p{Co}]+/gu;

/** A word as the index compares it: lower case, without diacritics. */
export function foldWord(word: string): string {
  return word.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase();
}

function wordsOf(text: string): string[] {
  return text.match(WORD) ?? [];
}

export interface SearchTerms {
  /** The FTS5 match expression: each phrase quoted, all of them required; undefined when the query has no word. */
  match: string | undefined;
  /** The query's words, folded, for marking an excerpt. */
  words: string[];
}

/**
 * The match expression of a query: each `"quoted"` part a phrase, each other space-separated
 * part a phrase of its words (so `foo-bar` matches the text `foo-bar` as the tokenizer saw it),
 * every phrase required. A phrase holds only words, so FTS5 syntax in the query (`*`, `NEAR`,
 * `-`, `:`, `^`, an unbalanced quote) is text, never an operator.
 */
export function searchTerms(query: string): SearchTerms {
  const phrases: string[][] = [];
  const quoted = /"([^"]*)"?/g;
  let last = 0;
  const loose = (text: string) => {
    for (const part of text.split(/\s+/)) {
      const words = wordsOf(part);
      if (words.length) phrases.push(words);
    }
  };
  for (let m = quoted.exec(query); m; m = quoted.exec(query)) {
    loose(query.slice(last, m.index));
    const words = wordsOf(m[1] ?? "");
    if (words.length) phrases.push(words);
    last = quoted.lastIndex;
  }
  loose(query.slice(last));
  // An uppercase NEAR, AND, OR or NOT inside quotes is a plain word to FTS5.
  const match = phrases.length ? phrases.map((p) => `"${p.join(" ")}"`).join(" ") : undefined;
  return { match, words: [...new Set(phrases.flat().map(foldWord))] };
}

/** An excerpt's length in characters, its marks and ellipses aside. */
export const EXCERPT_CHARS = 200;
/** How much of the excerpt comes before its first match. */
const LEAD_CHARS = 60;

/**
 * At most `max` characters of `text` around the first of `words` it holds (from the start when
 * none is found), each occurrence of a word wrapped in `**`, with `…` where text was left out.
 * `text` is already what may be shown (secrets redacted).
 */
export function excerptOf(text: string, words: readonly string[], max = EXCERPT_CHARS): string {
  const wanted = new Set(words);
  const hits: Array<{ start: number; end: number }> = [];
  for (const m of text.matchAll(WORD)) {
    if (wanted.has(foldWord(m[0]))) hits.push({ start: m.index, end: m.index + m[0].length });
  }
  const first = hits[0];
  let start = first ? Math.max(0, Math.min(first.start - LEAD_CHARS, text.length - max)) : 0;
  // Start at a word's beginning: back to the whitespace before it, unless that passes the match.
  if (start > 0) {
    const space = text.lastIndexOf(" ", start);
    if (space >= 0 && start - space < 20) start = space + 1;
  }
  const end = Math.min(text.length, start + max);
  let out = "";
  let at = start;
  for (const hit of hits) {
    if (hit.start < start || hit.end > end) continue;
    out += `${text.slice(at, hit.start)}**${text.slice(hit.start, hit.end)}**`;
    at = hit.end;
  }
  out += text.slice(at, end);
  out = out.replace(/\s+/g, " ").trim();
  return `${start > 0 ? "…" : ""}${out}${end < text.length ? "…" : ""}`;
}
