/**
 * The request body limit every surface applies: 1 MB, answered as a 413 `ApiError` (rendered
 * in each surface's own error shape).
 */
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./errors";

export const MAX_BODY_BYTES = 1024 * 1024;

export const limitBody = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new ApiError("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes (1 MB)`);
  },
});
