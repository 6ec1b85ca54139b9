/**
 * `GET /v1/media/:mediaId` (operator token): a file a person sent (SPEC §22), as the run that
 * received it kept it in R2 (`media.r2`), with its MIME type; its transcript's retention removes
 * it. Streamed from R2, never read into memory.
 */
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { loadConfig } from "../config/load";
import { mediaBucket, mediaResponse } from "../db/media-store";
import { ApiError } from "../http/errors";
import { SURFACE } from "../http/surface";

export const media = new Hono<{ Bindings: Env }>().get(
  SURFACE.media.path,
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const mediaId = c.req.param("mediaId");
    const bucket = mediaBucket(c.env, loadConfig(c.env));
    if (!bucket) throw new ApiError("NOT_FOUND", "no media store is configured (media.r2)");
    const res = await mediaResponse(bucket, mediaId);
    if (!res) throw new ApiError("NOT_FOUND", `media not found: ${mediaId}`);
    return res;
  },
);
