/** Parsing chat commands (src/session/chat/commands.ts `parseCommand`, pure). */
import { describe, expect, it } from "vitest";
import { parseCommand } from "../../src/session/chat/commands";

describe("parseCommand", () => {
  it("reads the commands of SPEC §12, case-insensitively", () => {
    expect(parseCommand("/STOP")).toEqual({ name: "stop" });
    expect(parseCommand(" /status ")).toEqual({ name: "status" });
    expect(parseCommand("/send off")).toEqual({ name: "send", mode: "off" });
    expect(parseCommand("/compact keep the decisions")).toEqual({
      name: "compact",
      instructions: "keep the decisions",
    });
    expect(parseCommand("/compact")).toEqual({ name: "compact", instructions: undefined });
    expect(parseCommand("/context")).toEqual({ name: "context", view: "list" });
    expect(parseCommand("/context detail")).toEqual({ name: "context", view: "detail" });
    expect(parseCommand("/context sideways")).toEqual({ name: "context", view: undefined });
    expect(parseCommand("/stop now")).toBeUndefined();
    expect(parseCommand("hello")).toBeUndefined();
  });

  it("gives the usage for /send with a name every object has", () => {
    for (const arg of ["constructor", "__proto__", "toString", "valueOf", "hasOwnProperty"]) {
      expect(parseCommand(`/send ${arg}`), arg).toEqual({ name: "send", mode: undefined });
    }
  });
});
