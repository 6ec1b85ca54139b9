import { describe, expect, it } from "vitest";
import { EXCERPT_CHARS, excerptOf, foldWord, searchTerms } from "../../src/transcript/search";

describe("searchTerms", () => {
  it("requires each word, and keeps a quoted part as one phrase", () => {
    expect(searchTerms("deploy failed")).toEqual({ match: '"deploy" "failed"', words: ["deploy", "failed"] });
    expect(searchTerms('the "blue whale" song').match).toBe('"the" "blue whale" "song"');
  });

  it("makes FTS5 syntax text: no operator, column filter, prefix or NEAR survives", () => {
    const cases: Array<[string, string | undefined]> = [
      ['"', undefined],
      ["*", undefined],
      ["-", undefined],
      [":", undefined],
      ["", undefined],
      ["   ", undefined],
      ["NEAR(a b, 2)", '"NEAR a" "b" "2"'],
      ["body:secret", '"body secret"'],
      ["-excluded", '"excluded"'],
      ["pre*", '"pre"'],
      ["a OR b", '"a" "OR" "b"'],
      ['unbalanced "quote here', '"unbalanced" "quote here"'],
      ["^start", '"start"'],
      ["foo-bar", '"foo bar"'],
    ];
    for (const [query, match] of cases) expect(searchTerms(query).match, query).toBe(match);
  });

  it("folds case and diacritics for marking", () => {
    expect(foldWord("Crème")).toBe("creme");
    expect(searchTerms("BRÛLÉE").words).toEqual(["brulee"]);
  });
});

describe("excerptOf", () => {
  it("marks each matched word, whatever its case or accents", () => {
    expect(excerptOf("Crème brûlée for dessert, more creme later", ["creme"])).toBe(
      "**Crème** brûlée for dessert, more **creme** later",
    );
  });

  it("keeps at most EXCERPT_CHARS characters around the first match, with ellipses", () => {
    const text = `${"lorem ipsum ".repeat(40)}needle ${"dolor sit ".repeat(40)}`;
    const excerpt = excerptOf(text, ["needle"]);
    expect(excerpt).toContain("**needle**");
    expect(excerpt.startsWith("…")).toBe(true);
    expect(excerpt.endsWith("…")).toBe(true);
    expect(excerpt.replace(/\*\*|…/g, "").length).toBeLessThanOrEqual(EXCERPT_CHARS);
  });

  it("starts at the beginning when the match is not in the shown text", () => {
    expect(excerptOf("token [REDACTED] here", ["sk"])).toBe("token [REDACTED] here");
  });
});
