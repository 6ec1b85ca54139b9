import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { isCommandOwner } from "../../src/policy/owners";

const config = parseConfig(
  JSON.stringify({
    session: { identityLinks: { Zoë: ["telegram:111", "discord:222"], bob: ["333"] } },
    commands: { owners: ["signal:+4915550001", "zoë", "bob", "Slack:U0ABC"] },
  }),
);

describe("commands.owners", () => {
  it.each([
    ["signal", "+4915550001", true],
    ["telegram", "+4915550001", false],
    ["slack", "u0abc", true],
    ["telegram", "111", true],
    ["discord", "222", true],
    ["discord", "111", false],
    ["whatsapp", "333", true],
    ["telegram", "444", false],
  ])("%s:%s is an owner: %s", (channel, id, owner) => {
    expect(isCommandOwner({ channel, id }, config)).toBe(owner);
  });

  it("has no owners by default", () => {
    expect(isCommandOwner({ channel: "telegram", id: "111" }, parseConfig("{}"))).toBe(false);
  });
});
