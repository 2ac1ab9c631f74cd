import type { RecordedEvent } from "../src/eventstore/types.js";
import { CRON_STREAM_PREFIX, cronEventSchemas, evolveCron, type CronEvent, type CronState } from "../src/domain/crons.js";

/** Crons by id, folded from their own streams (`cron-{id}`). Pure: no clock, no I/O. */
export const cronsProjection = {
  name: "crons",
  streamPrefixes: [CRON_STREAM_PREFIX] as const,
  eventTypes: Object.keys(cronEventSchemas),
  key: (event: RecordedEvent) => (event.streamId.startsWith(CRON_STREAM_PREFIX) ? event.streamId.slice(CRON_STREAM_PREFIX.length) : undefined),
  evolve: (state: CronState | undefined, event: RecordedEvent): CronState | undefined =>
    evolveCron(state, { type: event.type, data: event.data } as CronEvent, event.revision),
};
