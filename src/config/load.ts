/**
 * Turns the SWITCHBOARD_CONFIG text (JSON5) into a validated `Config`, or one `ConfigError` that
 * lists every problem as `config.<path>: <problem>`, so an operator can fix them all in one go.
 */
import JSON5 from "json5";
import type { z } from "zod";
import { formatValue } from "./fields";
import { type Config, ConfigSchema } from "./schema";

export class ConfigError extends Error {
  override name = "ConfigError";

  /** One line per problem, each starting with its `config.` path. */
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(
      `invalid SWITCHBOARD_CONFIG (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n${problems.map((p) => `  - ${p}`).join("\n")}`,
    );
    this.problems = problems;
  }
}

type RawIssue = z.core.$ZodRawIssue;

const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  object: "an object",
  record: "an object",
  array: "an array",
};

function allowed(values: readonly unknown[]): string {
  return values.map((v) => (typeof v === "string" ? JSON.stringify(v) : String(v))).join(", ");
}

/** Messages for zod's built-in checks; schema.ts writes its own for everything else. */
function describeIssue(iss: RawIssue): string | undefined {
  const got = `(got ${formatValue(iss.input)})`;
  switch (iss.code) {
    case "invalid_type":
      if (iss.input === undefined) return "is required";
      return `must be ${EXPECTED[iss.expected] ?? iss.expected} ${got}`;
    case "invalid_value": {
      if (iss.input === undefined) return `is required (allowed: ${allowed(iss.values)})`;
      if (iss.values.length === 1) return `must be ${allowed(iss.values)} ${got}`;
      return `must be one of ${allowed(iss.values)} ${got}`;
    }
    case "too_small": {
      const min = Number(iss.minimum);
      if (iss.origin === "string")
        return min === 1 ? `must not be empty` : `must be at least ${min} characters ${got}`;
      if (iss.origin === "array") return `must have at least ${min} entr${min === 1 ? "y" : "ies"}`;
      return `must be ${iss.inclusive ? ">=" : ">"} ${min} ${got}`;
    }
    case "too_big": {
      const max = Number(iss.maximum);
      if (iss.origin === "string") return `must be at most ${max} characters`;
      if (iss.origin === "array") return `must have at most ${max} entr${max === 1 ? "y" : "ies"}`;
      return `must be ${iss.inclusive ? "<=" : "<"} ${max} ${got}`;
    }
    case "invalid_format":
      return `must be a valid ${iss.format} ${got}`;
    case "unrecognized_keys": {
      const shape = (iss.inst as { shape?: Record<string, unknown> } | undefined)?.shape;
      return shape ? `unknown key (allowed: ${Object.keys(shape).join(", ")})` : "unknown key";
    }
    case "invalid_key":
      return `invalid name: ${iss.issues.map((nested) => nested.message).join("; ")}`;
    default:
      return undefined;
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "config";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (typeof segment === "string" && /^[A-Za-z_$][\w$]*$/.test(segment)) out += `.${segment}`;
    else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out;
}

function problemsOf(error: z.ZodError): string[] {
  const problems: string[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      // zod reports all unknown keys of one object together; each gets its own line and path.
      for (const key of issue.keys) problems.push(`${formatPath([...issue.path, key])}: ${issue.message}`);
    } else {
      problems.push(`${formatPath(issue.path)}: ${issue.message}`);
    }
  }
  return problems;
}

function parseJson5(text: string): unknown {
  try {
    return JSON5.parse(text);
  } catch (err) {
    // A document of nothing but comments means "no settings", like an empty one.
    try {
      const probe: unknown = JSON5.parse(`${text}\n{}`);
      if (probe !== null && typeof probe === "object" && Object.keys(probe).length === 0) return {};
    } catch {}
    const e = err as { message?: string; lineNumber?: number; columnNumber?: number };
    const reason = String(e.message ?? err)
      .replace(/^JSON5:\s*/, "")
      .replace(/ at \d+:\d+$/, "");
    const where = e.lineNumber !== undefined ? ` at line ${e.lineNumber}, column ${e.columnNumber}` : "";
    throw new ConfigError([`config: invalid JSON5${where}: ${reason}`]);
  }
}

/**
 * Parses and validates a config document. `undefined`, empty or whitespace-only text is `{}`.
 * `config.session.reset` is always defined in the result: the schema resolves the effective
 * default reset policy, including the legacy `session.idleMinutes` rule (see `withEffectiveReset`
 * in schema.ts).
 */
export function parseConfig(text: string | undefined): Config {
  const data = text === undefined || text.trim() === "" ? {} : parseJson5(text);
  const result = ConfigSchema.safeParse(data, { reportInput: true, error: describeIssue });
  if (!result.success) throw new ConfigError(problemsOf(result.error));
  return result.data;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

// A cache only (SPEC §1): an isolate sees the same text on every request, so it is parsed once.
// A few entries rather than one, so isolates (or tests) alternating between configs stay cheap.
const CACHE_LIMIT = 8;
const cache = new Map<string, Config | ConfigError>();

/**
 * The config from the environment, validated once per distinct text. The same text always
 * yields the same object, deep-frozen because every request in the isolate shares it; bad text
 * always rethrows the same `ConfigError`, whose messages are logged once, when the text is
 * first seen: the logs and the operator's `status` RPC show them, HTTP answers to others do not.
 */
export function loadConfig(env: { SWITCHBOARD_CONFIG?: string }): Config {
  const text = env.SWITCHBOARD_CONFIG ?? "";
  let entry = cache.get(text);
  if (entry === undefined) {
    try {
      entry = deepFreeze(parseConfig(text));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(err.message);
      entry = err;
    }
    if (cache.size >= CACHE_LIMIT) {
      const oldest = cache.keys().next();
      if (!oldest.done) cache.delete(oldest.value);
    }
    cache.set(text, entry);
  }
  if (entry instanceof ConfigError) throw entry;
  return entry;
}
