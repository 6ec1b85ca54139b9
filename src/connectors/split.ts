/**
 * A reply longer than a platform takes in one message, as several messages in order (SPEC §18):
 * cut at the last line break that fits, else the last space, else hard at the limit; never
 * inside a surrogate pair. Pure.
 */

/** The parts of `text`, each at most `limit` UTF-16 code units; "" is one empty part. */
export function splitText(text: string, limit: number): string[] {
  if (limit < 2) throw new Error(`a part must hold at least 2 characters (got ${limit})`);
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    let cut = window.lastIndexOf("\n");
    if (cut <= 0) cut = window.lastIndexOf(" ");
    let skip = 1;
    if (cut <= 0) {
      cut = limit;
      skip = 0;
      // A high surrogate at the end would split a character in two.
      const code = rest.charCodeAt(cut - 1);
      if (code >= 0xd800 && code <= 0xdbff) cut--;
    }
    parts.push(rest.slice(0, cut).trimEnd() || rest.slice(0, cut));
    rest = rest.slice(cut + skip);
  }
  parts.push(rest);
  return parts.filter((p, i) => p.length > 0 || i === 0);
}
