import type { EventStore } from "./types.js";

/**
 * A store that forwards every call to `store` but its appends, which `append` decorates (schema
 * checks, attribution): the one shape of every store wrapper.
 */
export function withAppend(store: EventStore, append: EventStore["append"]): EventStore {
  return {
    kind: store.kind,
    append(stream, events, expected, options) {
      const appended = append(stream, events, expected, options);
      const ticket = options?.ticket;
      if (!ticket) return appended;
      // Refused before it reached the store (a schema check): appends that depend on it fail too.
      return appended.catch((error: unknown) => {
        ticket.failed(error);
        throw error;
      });
    },
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
