/**
 * The gateway's stable hashing. FNV-1a, 32 bits: the one stable string hash, shared by run ids
 * (which carry their session key's hash, keys/run-id.ts) and storage placement (which picks a
 * session's database from that hash), so a run id alone leads to its session's database; and
 * the rendezvous choice of that database among the binding names (db/placement.ts applies it to
 * the deployment's `storage.d1`; the bench seeds rows with it). Not cryptographic; synchronous
 * and cheap. Pure; imports nothing (Node runs it as it is).
 */

/** FNV-1a of `text`, 32 bits. */
export function fnv1a32(text: string, basis = 0x811c9dc5): number {
  let h = basis;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** murmur3's finalizer: spreads every input bit over the output, so scores are independent. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The index in `names` of the database a key of hash `keyHash` lives in. Pure. */
export function placeIndex(nameHashes: ArrayLike<number>, keyHash: number): number {
  let best = 0;
  let bestScore = -1;
  for (let i = 0; i < nameHashes.length; i++) {
    const score = mix((keyHash ^ (nameHashes[i] ?? 0)) >>> 0);
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

/** The index in `names` of the database of `key` under that list of bindings. Pure. */
export function placeKey(names: readonly string[], key: string): number {
  return placeIndex(
    names.map((n) => fnv1a32(n)),
    fnv1a32(key),
  );
}
