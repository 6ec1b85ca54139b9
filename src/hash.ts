/**
 * FNV-1a, 32 bits: the one stable string hash of the gateway, shared by run ids (which carry their
 * session key's hash, keys/run-id.ts) and storage placement (which picks a session's database from
 * that hash, db/placement.ts), so a run id alone leads to its session's database. Not
 * cryptographic; synchronous and cheap. Pure; imports nothing.
 */
export function fnv1a32(text: string, basis = 0x811c9dc5): number {
  let h = basis;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
