import { describe, expect, it } from "vitest";
import { splitText } from "../../src/connectors/split";

describe("splitting a reply at a platform's limit", () => {
  it("keeps a text that fits as one part", () => {
    expect(splitText("hello", 10)).toEqual(["hello"]);
    expect(splitText("", 10)).toEqual([""]);
  });

  it("cuts at the last line break, else the last space, else hard", () => {
    expect(splitText("aaaa\nbbbb cccc", 10)).toEqual(["aaaa", "bbbb cccc"]);
    expect(splitText("aaaa bbbb cccc", 10)).toEqual(["aaaa bbbb", "cccc"]);
    expect(splitText("abcdefghijklmno", 10)).toEqual(["abcdefghij", "klmno"]);
  });

  it("never splits a surrogate pair", () => {
    const parts = splitText(`${"a".repeat(9)}😀bc`, 10);
    expect(parts).toEqual(["a".repeat(9), "😀bc"]);
  });

  it("10,000 characters: every part within the limit, nothing lost, in order", () => {
    const words = Array.from({ length: 2_000 }, (_, i) => `w${i}`);
    const text = words.join(" ").slice(0, 10_000);
    for (const limit of [2000, 4000, 4096]) {
      const parts = splitText(text, limit);
      expect(parts.every((p) => p.length <= limit)).toBe(true);
      expect(parts.join(" ").replace(/\s+/g, " ")).toBe(text.replace(/\s+/g, " "));
    }
  });
});
