import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { matchResetTrigger } from "../../src/session/entry/reset-trigger";

const config = parseConfig(JSON.stringify({ models: { aliases: { fast: "openai/gpt-4.1-mini" } } }));
const TRIGGERS = config.session.resetTriggers;

const match = (text: string, triggers = TRIGGERS) => matchResetTrigger(text, triggers, config);

describe("reset triggers", () => {
  it("defaults to /new and /reset", () => {
    expect(TRIGGERS).toEqual(["/new", "/reset"]);
  });

  it("a bare /new or /reset is a trigger with nothing left over", () => {
    expect(match("/new")).toEqual({ trigger: "/new", rest: "" });
    expect(match("/reset")).toEqual({ trigger: "/reset", rest: "" });
  });

  it("ignores surrounding whitespace", () => {
    expect(match("  /reset \n")).toEqual({ trigger: "/reset", rest: "" });
  });

  it("/new followed by a space passes the rest through as the first message", () => {
    expect(match("/new rest of message")).toEqual({ trigger: "/new", rest: "rest of message" });
    expect(match("/reset what is the weather?")).toEqual({ trigger: "/reset", rest: "what is the weather?" });
  });

  it("/new <provider/model> consumes the model and passes the remaining text", () => {
    expect(match("/new echo/other more text")).toEqual({
      trigger: "/new",
      rest: "more text",
      model: "echo/other",
    });
  });

  it("/new <model> alone sets the model and leaves nothing (the greeting turn runs)", () => {
    expect(match("/new echo/other")).toEqual({ trigger: "/new", rest: "", model: "echo/other" });
  });

  it("/new <alias> resolves the alias, case-insensitively", () => {
    expect(match("/new fast hello")).toEqual({
      trigger: "/new",
      rest: "hello",
      model: "openai/gpt-4.1-mini",
    });
    expect(match("/new FAST hello")).toEqual({
      trigger: "/new",
      rest: "hello",
      model: "openai/gpt-4.1-mini",
    });
  });

  it("a first word that is not a model stays part of the message", () => {
    expect(match("/new unknown/model hi")).toEqual({ trigger: "/new", rest: "unknown/model hi" });
    expect(match("/new fastest car")).toEqual({ trigger: "/new", rest: "fastest car" });
  });

  it("/reset never consumes a model", () => {
    expect(match("/reset echo/other hi")).toEqual({ trigger: "/reset", rest: "echo/other hi" });
  });

  it("a word that merely starts with a trigger is not a trigger", () => {
    expect(match("/newish")).toBeUndefined();
    expect(match("/news today")).toBeUndefined();
    expect(match("/resetting")).toBeUndefined();
  });

  it("a trigger in the middle of a message is not a trigger", () => {
    expect(match("please /new")).toBeUndefined();
    expect(match("hello")).toBeUndefined();
    expect(match("")).toBeUndefined();
  });

  it("matches case-insensitively", () => {
    expect(match("/NEW")).toEqual({ trigger: "/new", rest: "" });
    expect(match("/Reset Hello There")).toEqual({ trigger: "/reset", rest: "Hello There" });
    expect(match("/New echo/other Hi")).toEqual({ trigger: "/new", rest: "Hi", model: "echo/other" });
  });

  it("uses the configured triggers only", () => {
    expect(match("!fresh start", ["!fresh"])).toEqual({ trigger: "!fresh", rest: "start" });
    expect(match("/new", ["!fresh"])).toBeUndefined();
  });
});
