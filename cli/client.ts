/**
 * The operator RPC client of the CLI: `POST <url>/rpc/<method>` with the bearer token, the
 * `{ ok, payload }` / `{ ok: false, error }` answer unwrapped, and every failure turned into one
 * `CliError` carrying the exit code scripts rely on (see EXIT). No Worker code is imported: the
 * CLI speaks to a gateway over HTTP only.
 */

/** Exit codes (README "CLI"): stable, so scripts can branch on them. */
export const EXIT = {
  ok: 0,
  /** The gateway answered with an error (409, 429, 500…) or something that is not an RPC answer. */
  api: 1,
  /** Bad arguments or options: refused by the CLI, or by the gateway (400). */
  usage: 2,
  /** The token was refused (401, 403), or the gateway has no operator token set (503 naming it). */
  auth: 3,
  /** Unknown session, run, delivery or method (404). */
  notFound: 4,
  /** No answer from the gateway: refused connection, unknown host, timeout. */
  connect: 5,
  /**
   * The gateway cannot serve now (any other 503): its `storage.d1` changed and awaits
   * `switchboard storage rebalance`, or D1 refused a record for now. The message says which.
   */
  unavailable: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the CLI reports as one line on stderr and an exit code. */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  constructor(exitCode: ExitCode, message: string) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** The exit code of a gateway error: by status, and for a 503 by whether it names the unset token. */
export function exitCodeForStatus(status: number, message = ""): ExitCode {
  if (status === 400) return EXIT.usage;
  if (status === 401 || status === 403) return EXIT.auth;
  // The operator surface answers 503 naming GATEWAY_TOKEN while that secret is unset.
  if (status === 503) return message.includes("GATEWAY_TOKEN") ? EXIT.auth : EXIT.unavailable;
  if (status === 404) return EXIT.notFound;
  return EXIT.api;
}

export interface ClientOptions {
  url: string;
  token: string;
  fetch: typeof fetch;
  /** Gives up on one request after this long (default 30 s). */
  timeoutMs?: number;
}

export interface RpcClient {
  readonly url: string;
  /** The payload of a successful call; throws `CliError` otherwise. */
  call<T = Record<string, unknown>>(
    method: string,
    params?: Record<string, unknown>,
    opts?: { signal?: AbortSignal; timeoutMs?: number },
  ): Promise<T>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** The gateway URL as given, checked (http or https) and without a trailing slash. */
export function normalizeUrl(raw: string, source: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new CliError(
      EXIT.usage,
      `${source} is not a URL: ${JSON.stringify(raw)} (e.g. http://127.0.0.1:8787)`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new CliError(EXIT.usage, `${source} must be an http:// or https:// URL (got ${parsed.protocol})`);
  }
  return raw.replace(/\/+$/, "");
}

/** Why a fetch produced no answer, in a few words: the system error code when there is one. */
function connectFailure(error: unknown): string {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return error.name === "TimeoutError" ? "no answer in time" : "aborted";
  }
  const cause =
    error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined;
  if (cause?.code) return cause.code;
  if (cause?.message) return cause.message;
  return error instanceof Error ? error.message : String(error);
}

export function createClient(options: ClientOptions): RpcClient {
  const { url, token } = options;
  return {
    url,
    async call<T>(
      method: string,
      params: Record<string, unknown> = {},
      opts: { signal?: AbortSignal; timeoutMs?: number } = {},
    ): Promise<T> {
      const endpoint = `${url}/rpc/${method}`;
      const timeout = AbortSignal.timeout(opts.timeoutMs ?? options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
      let res: Response;
      let text: string;
      try {
        res = await options.fetch(endpoint, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(params),
          signal,
        });
        text = await res.text();
      } catch (error) {
        // The caller's own abort (Ctrl-C) is not a connection problem: let it through as is.
        if (opts.signal?.aborted) throw error;
        throw new CliError(EXIT.connect, `cannot connect to ${url}: ${connectFailure(error)}`);
      }
      let body: { ok?: unknown; payload?: unknown; error?: { code?: unknown; message?: unknown } };
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        body = {};
      }
      if (res.ok && body.ok === true) return body.payload as T;
      if (body.ok === false && body.error && typeof body.error.message === "string") {
        throw new CliError(
          exitCodeForStatus(res.status, body.error.message),
          `${res.status} ${String(body.error.code ?? "ERROR")} ${body.error.message}`,
        );
      }
      // Not the gateway's JSON: a proxy, another server on that port, a wrong URL.
      const snippet = text.replace(/\s+/g, " ").trim().slice(0, 120);
      throw new CliError(
        res.status === 401 || res.status === 403 ? EXIT.auth : EXIT.api,
        `${res.status} from ${endpoint} is not a Switchboard RPC answer${snippet ? `: ${snippet}` : ""}`,
      );
    },
  };
}
