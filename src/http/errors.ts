/**
 * The one JSON error shape of every HTTP surface: `{ ok: false, error: { code, message } }`
 * with the matching status. Thrown inside handlers, rendered by `app.onError`.
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import type { ActorError } from "../runs/types";

export type ErrorCode =
  | "INVALID_REQUEST"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "CONFLICT"
  | "PAYLOAD_TOO_LARGE"
  | "RATE_LIMITED"
  | "INTERNAL"
  | "UNAVAILABLE";

export const STATUS: Record<ErrorCode, ContentfulStatusCode> = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  UNAVAILABLE: 503,
};

export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
  get status(): ContentfulStatusCode {
    return STATUS[this.code];
  }
}

/** A SessionActor's refusal (an error value across the DO boundary) as the HTTP error it maps to. */
export function actorError(e: ActorError): ApiError {
  return new ApiError(e.code, e.message);
}

/** What a request that reached no operator surface learns of an invalid config. */
export const INVALID_CONFIG_MESSAGE =
  "the gateway's configuration is invalid; an operator can see why in the status RPC and the logs";

export function errorBody(code: ErrorCode, message: string) {
  return { ok: false as const, error: { code, message } };
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const path = issue.path.length ? issue.path.map(String).join(".") : "(body)";
  switch (issue.code) {
    case "unrecognized_keys":
      return `${path === "(body)" ? "" : `${path}: `}unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys
        .map((k) => `\`${k}\``)
        .join(", ")}`;
    case "invalid_value":
      return `\`${path}\` must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_type":
      return issue.input === undefined ? `\`${path}\` is required` : `\`${path}\` must be ${issue.expected}`;
    default:
      return `\`${path}\`: ${issue.message}`;
  }
}

/** Validates with a zod schema; a failure is one 400 whose message names the field(s). */
export function parseInput<S extends z.ZodType>(schema: S, data: unknown): z.output<S> {
  // reportInput: zod 4 leaves the offending input out of issues otherwise, and the messages
  // need it to tell "missing" from "wrong type".
  const result = schema.safeParse(data, { reportInput: true });
  if (result.success) return result.data;
  throw new ApiError("INVALID_REQUEST", result.error.issues.slice(0, 5).map(describeIssue).join("; "));
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A decoded body holds lone surrogates only through `\uD800`-style escapes. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Lone surrogates become U+FFFD, as UTF-8 would store them anyway: a session key, id or text
 * then reads back from D1 (and names a Durable Object) exactly as the request used it.
 */
function wellFormed(_key: string, value: unknown): unknown {
  return typeof value === "string" ? value.replace(LONE_SURROGATE, "\ufffd") : value;
}

/**
 * Parses a JSON request body text; malformed JSON is a 400 that says where. Strings come out
 * well-formed (lone surrogates replaced by U+FFFD).
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return SURROGATE_ESCAPE.test(text) ? JSON.parse(text, wellFormed) : JSON.parse(text);
  } catch (error) {
    throw new ApiError(
      "INVALID_REQUEST",
      `body is not valid JSON: ${error instanceof Error ? error.message : error}`,
    );
  }
}
