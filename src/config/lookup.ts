/**
 * Config entries named by a request (a connector by channel, an RPC method by name): only the
 * record's own entries count, so `constructor`, `__proto__` or `toString` are unknown names
 * like any other instead of reaching what every object inherits.
 */

/** The own entry `name` of `record`, or undefined. */
export function ownEntry<T>(record: Readonly<Record<string, T>>, name: string): T | undefined {
  return Object.hasOwn(record, name) ? record[name] : undefined;
}
