import type { FastifyInstance } from "fastify";

/**
 * Nothing a response says may be lost to a power cut: before any response leaves, everything the log has
 * committed so far is made durable (on SQLite the WAL's fsync, grouped, off the event loop; see WalDurability).
 * A response that waits costs no CPU, and one fsync covers every response waiting on it.
 */
export function durableResponses(whenDurable: () => Promise<void> | undefined): (app: FastifyInstance) => void {
  return (app) => {
    app.addHook("onSend", (_request, reply, payload, done) => {
      // An error reply (the store failing among them) has nothing to make durable.
      const durable = reply.statusCode >= 500 ? undefined : whenDurable();
      if (!durable) return done(null, payload);
      durable.then(
        () => done(null, payload),
        (error: Error) => done(error),
      );
    });
  };
}
