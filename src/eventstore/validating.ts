import type { ZodType } from "zod";
import {
  InvalidEventError,
  type EventData,
  type EventStore,
  type RecordedEvent,
  type Subscription,
  type SubscriptionItem,
} from "./types.js";

/** Finds the schema of an event type; undefined means the type is not in the catalogue. */
export type SchemaLookup = (type: string) => ZodType | undefined;

function check(schemaFor: SchemaLookup, stream: string, revision: bigint | undefined, type: string, data: unknown): void {
  const schema = schemaFor(type);
  if (!schema) throw new InvalidEventError(stream, revision, type, "unknown event type");
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length ? `${issue.path.join(".")}: ` : "";
    throw new InvalidEventError(stream, revision, type, `${where}${issue?.message ?? "invalid data"}`);
  }
}

function checkRecorded(schemaFor: SchemaLookup, event: RecordedEvent): RecordedEvent {
  check(schemaFor, event.streamId, event.revision, event.type, event.data);
  return event;
}

function validatingSubscription(inner: Subscription, schemaFor: SchemaLookup): Subscription {
  return {
    close: () => inner.close(),
    async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
      for await (const item of inner) {
        if (item.kind === "event") checkRecorded(schemaFor, item.event);
        yield item;
      }
    },
  };
}

/**
 * Wraps a store so that every event is checked against its schema on write and on read.
 * A bad event in the log is an error naming its stream and revision, never silently skipped.
 */
export function withSchemas(store: EventStore, schemaFor: SchemaLookup): EventStore {
  return {
    kind: store.kind,
    async append(stream, events: EventData[], expected) {
      for (const e of events) check(schemaFor, stream, undefined, e.type, e.data);
      return store.append(stream, events, expected);
    },
    async readStream(stream, options) {
      return (await store.readStream(stream, options)).map((e) => checkRecorded(schemaFor, e));
    },
    async readAll(options) {
      return (await store.readAll(options)).map((e) => checkRecorded(schemaFor, e));
    },
    headPosition: () => store.headPosition(),
    subscribeToStream: (stream, options) => validatingSubscription(store.subscribeToStream(stream, options), schemaFor),
    subscribeToAll: (options) => validatingSubscription(store.subscribeToAll(options), schemaFor),
    close: () => store.close(),
  };
}
