import { describe, expect, it } from "vitest";

describe("toolchain", () => {
  it("runs inside workerd", () => {
    expect(typeof navigator.userAgent).toBe("string");
  });
});
