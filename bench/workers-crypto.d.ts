/**
 * The bench imports `signBody` from src/auth/signature.ts, whose `safeEqual` uses the
 * Workers-only `crypto.subtle.timingSafeEqual`. Declared here so the Node type-check
 * (tsconfig.node.json) knows it; the bench never calls it.
 */
interface SubtleCrypto {
  timingSafeEqual(a: ArrayBuffer | ArrayBufferView, b: ArrayBuffer | ArrayBufferView): boolean;
}
