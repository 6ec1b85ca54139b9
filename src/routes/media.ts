/**
 * `GET /v1/media/:mediaId` (operator token): a file a person sent (SPEC §22), as the run that
 * received it kept it in R2 (`media.r2`), with its MIME type; its transcript's retention removes
 * it. Streamed from R2, never read into memory.
 */
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { loadConfig } from "../config/load";
import { mediaBucket, mediaKey } from "../db/media-store";
import { ApiError } from "../http/errors";
import { SURFACE } from "../http/surface";

export const media = new Hono<{ Bindings: Env }>().get(
  SURFACE.media.path,
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const mediaId = c.req.param("mediaId");
    const key = mediaKey(mediaId);
    if (!key)
      throw new ApiError("NOT_FOUND", `unknown media id "${mediaId}": ids are <sessionId>.<24 hex digits>`);
    const bucket = mediaBucket(c.env, loadConfig(c.env));
    if (!bucket) throw new ApiError("NOT_FOUND", "no media store is configured (media.r2)");
    const object = await bucket.get(key);
    if (!object) throw new ApiError("NOT_FOUND", `media not found: ${mediaId}`);
    const name = object.customMetadata?.name;
    return new Response(object.body, {
      headers: {
        "content-type": object.httpMetadata?.contentType ?? "application/octet-stream",
        "content-length": String(object.size),
        "cache-control": "private, max-age=3600",
        ...(name ? { "content-disposition": `inline; filename="${name.replace(/["\\\r\n]/g, "_")}"` } : {}),
        "x-content-type-options": "nosniff",
      },
    });
  },
);
