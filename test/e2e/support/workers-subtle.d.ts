/**
 * `src/auth/signature.ts` uses the Workers-only `crypto.subtle.timingSafeEqual`; the e2e
 * helpers import that module under the Node type-check (tsconfig.node.json), and
 * `workers-crypto.ts` installs it at runtime.
 */
interface SubtleCrypto {
  timingSafeEqual(a: ArrayBuffer | ArrayBufferView, b: ArrayBuffer | ArrayBufferView): boolean;
}
