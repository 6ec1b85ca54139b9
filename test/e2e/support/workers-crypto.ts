/**
 * `src/auth/signature.ts` compares MACs with `crypto.subtle.timingSafeEqual`, which exists in
 * workerd but not in Node's WebCrypto. The e2e helpers verify connector signatures in Node with
 * that same module, so this installs the Workers API (same contract: equal-length buffers,
 * throws otherwise) on Node's SubtleCrypto before it is used. Importing it is enough.
 */
import { timingSafeEqual } from "node:crypto";

type Bytes = ArrayBuffer | ArrayBufferView;

function view(b: Bytes): Uint8Array {
  return ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b);
}

const proto = Object.getPrototypeOf(globalThis.crypto.subtle) as object;
if (!("timingSafeEqual" in proto)) {
  Object.defineProperty(proto, "timingSafeEqual", {
    configurable: true,
    writable: true,
    value(a: Bytes, b: Bytes): boolean {
      return timingSafeEqual(view(a), view(b));
    },
  });
}
