/**
 * The two wrangler configs as wrangler itself reads them: wrangler.toml (dev, tests, `npm run
 * deploy`) and wrangler.workers-ai.toml (the same Worker plus the AI binding). They stay one
 * Worker apart from `[ai]`, declare no environment (wrangler warns on every plain deploy and
 * `secret put` of a config that has one), and pin no resource id (a fresh account's deploy
 * creates the database and the bucket by name).
 */
import { describe, expect, it } from "vitest";
import { experimental_readRawConfig } from "wrangler";

function read(file: string) {
  return experimental_readRawConfig({ config: file }, { hideWarnings: true }).rawConfig;
}

describe("wrangler configs", () => {
  const plain = read("wrangler.toml");
  const workersAi = read("wrangler.workers-ai.toml");

  it("makes the Workers AI variant wrangler.toml plus the AI binding", () => {
    expect(workersAi.ai).toEqual({ binding: "AI" });
    const { ai: _ai, ...rest } = workersAi;
    expect(rest).toEqual(plain);
    expect(plain.ai).toBeUndefined();
  });

  it("declares no environment", () => {
    expect(plain.env).toBeUndefined();
    expect(workersAi.env).toBeUndefined();
  });

  it("names the D1 database and the media bucket without ids", () => {
    expect(plain.d1_databases).toEqual([
      { binding: "DB", database_name: "switchboard", migrations_dir: "migrations" },
    ]);
    expect(plain.r2_buckets).toEqual([{ binding: "MEDIA", bucket_name: "switchboard-media" }]);
  });
});
