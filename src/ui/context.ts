/**
 * What every dashboard handler shares: the Hono env (bindings and the login's variables), the
 * operator RPC called in-process through `callMethod` (the dashboard has no logic of its own
 * about sessions, runs or deliveries), and reading form fields and query parameters.
 */
import type { Context } from "hono";
import { loadConfig } from "../config/load";
import { ApiError } from "../http/errors";
import { callMethod } from "../rpc/methods";

export interface UiEnv {
  Bindings: Env;
  Variables: {
    /** GATEWAY_TOKEN (the middleware answered 503 when it is unset). */
    token: string;
    /** The login cookie's value, once logged in. */
    login: string;
    /** The login's CSRF token, for the forms of the page. */
    csrfToken: string;
  };
}

export type UiContext = Context<UiEnv>;

/** An operator RPC method, as `POST /rpc/:method` would run it. */
export async function rpc<T>(c: UiContext, method: string, params: Record<string, unknown> = {}): Promise<T> {
  return (await callMethod(method, params, { env: c.env, config: loadConfig(c.env) })) as T;
}

/** A query parameter, or undefined when absent or blank. */
export function query(c: UiContext, name: string): string | undefined {
  const v = c.req.query(name)?.trim();
  return v ? v : undefined;
}

/** A whole-number query parameter, or undefined when absent; anything else is a 400. */
export function queryInt(c: UiContext, name: string): number | undefined {
  const v = query(c, name);
  if (v === undefined) return undefined;
  if (!/^\d{1,15}$/.test(v))
    throw new ApiError("INVALID_REQUEST", `\`${name}\` must be a whole number (got "${v}")`);
  return Number(v);
}

export type Form = Record<string, string | File | (string | File)[]>;

export async function readForm(c: UiContext): Promise<Form> {
  const type = c.req.header("content-type") ?? "";
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) {
    throw new ApiError(
      "INVALID_REQUEST",
      "send the form as application/x-www-form-urlencoded or multipart/form-data",
    );
  }
  return c.req.parseBody({ all: true });
}

/** A text field: trimmed, or undefined when absent or blank. */
export function field(form: Form, name: string): string | undefined {
  const v = form[name];
  const s = typeof v === "string" ? v.trim() : undefined;
  return s ? s : undefined;
}

export function requiredField(form: Form, name: string): string {
  const v = field(form, name);
  if (v === undefined) throw new ApiError("INVALID_REQUEST", `\`${name}\` is required`);
  return v;
}

/** The current URL with the live-fragment flag: what a live region polls. */
export function liveUrl(c: UiContext): string {
  const url = new URL(c.req.url);
  url.searchParams.delete("notice");
  url.searchParams.set("fragment", "live");
  return `${url.pathname}${url.search}`;
}

export function wantsFragment(c: UiContext): boolean {
  return c.req.query("fragment") === "live";
}
