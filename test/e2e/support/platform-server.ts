/**
 * The four platform fakes (test/support/platform-fakes.ts) behind one HTTP server on 127.0.0.1,
 * each under its own base URL, for the gateway's `apiBaseUrl`s under `wrangler dev`.
 */
import { once } from "node:events";
import { createServer } from "node:http";
import { listenOnLoopback } from "../../../scripts/lib/local-server.ts";
import type { FakePlatform } from "../../support/platform-fakes.ts";
import { readBody } from "./http-fake.ts";

export interface PlatformServer {
  /** The base URL of a fake mounted at `prefix` (e.g. `/telegram`). */
  base(prefix: string): string;
  close(): Promise<void>;
}

export async function startPlatformServer(fakes: Record<string, FakePlatform>): Promise<PlatformServer> {
  let port = 0;
  const base = (prefix: string) => `http://127.0.0.1:${port}${prefix}`;
  const server = createServer((req, res) => {
    (async () => {
      const path = req.url ?? "/";
      const prefix = Object.keys(fakes).find((p) => path.startsWith(`${p}/`));
      if (!prefix) {
        res.writeHead(404).end("no fake here");
        return;
      }
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await readBody(req);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
      const answer = await (fakes[prefix] as FakePlatform).handle(
        new Request(`${base("")}${path}`, { method: req.method ?? "GET", headers, body }),
        base(prefix),
      );
      const out: Record<string, string> = {};
      answer.headers.forEach((v, k) => {
        out[k] = v;
      });
      res.writeHead(answer.status, out);
      // Bytes as the fake gave them (a file download is binary).
      res.end(Buffer.from(await answer.arrayBuffer()));
    })().catch((error: unknown) => {
      res.writeHead(500).end(String(error));
    });
  });
  port = await listenOnLoopback(server);
  return {
    base,
    async close() {
      server.close();
      await once(server, "close");
    },
  };
}
