/**
 * The media bucket: wrangler.toml's `[[r2_buckets]] binding = "MEDIA"` reaches the Worker's env
 * in workerd (the vitest plugin reads wrangler.toml, as `wrangler dev` does), backed by the local
 * R2 simulator, so media code can be tested without an account.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

describe("the MEDIA R2 binding", () => {
  it("stores an object and gives back its bytes and metadata", async () => {
    const bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    await env.MEDIA.put("media/test/pixel.png", bytes, {
      httpMetadata: { contentType: "image/png" },
      customMetadata: { sessionKey: "agent:main:main" },
    });

    const object = await env.MEDIA.get("media/test/pixel.png");
    expect(object).not.toBeNull();
    expect(new Uint8Array(await (object as R2ObjectBody).arrayBuffer())).toEqual(bytes);
    expect(object?.size).toBe(bytes.byteLength);
    expect(object?.httpMetadata?.contentType).toBe("image/png");
    expect(object?.customMetadata).toEqual({ sessionKey: "agent:main:main" });
  });

  it("answers null for a key that was never stored", async () => {
    expect(await env.MEDIA.get("media/test/missing.png")).toBeNull();
  });
});
