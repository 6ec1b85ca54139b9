/**
 * The part of `node:async_hooks` the bench's counting entry (db-load-worker.ts) uses: workerd
 * provides the module under `nodejs_compat`, and the Worker's type-check (tsconfig.json) has no
 * Node types.
 */
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    getStore(): T | undefined;
    run<R>(store: T, fn: () => R): R;
  }
}
