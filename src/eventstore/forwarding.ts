import type { AppendOptions, EventStore } from "./types.js";

/**
 * A store that forwards every call to `store` but its appends, which `append` decorates (schema
 * checks, attribution): the one shape of every store wrapper. A decorator that refuses an append
 * itself, before the store saw it, answers with `refused` (the store fails the ticket of every
 * append it is given).
 */
export function withAppend(store: EventStore, append: EventStore["append"]): EventStore {
  return {
    kind: store.kind,
    append,
    readStream: (stream, options) => store.readStream(stream, options),
    readAll: (options) => store.readAll(options),
    whenDurable: () => store.whenDurable(),
    headPosition: () => store.headPosition(),
    subscribeToStream: (stream, options) => store.subscribeToStream(stream, options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    purgeStreams: (streams) => store.purgeStreams(streams),
    close: () => store.close(),
  };
}

/**
 * A wrapper's refusal of an append the store never saw: its ticket fails as the store's would, so
 * that appends depending on it fail too.
 */
export function refused(options: AppendOptions | undefined, error: unknown): Promise<never> {
  options?.ticket?.failed(error);
  return Promise.reject(error);
}
