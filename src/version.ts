/** Reported by /healthz and the `status` RPC. */
export const VERSION = "0.1.0";
