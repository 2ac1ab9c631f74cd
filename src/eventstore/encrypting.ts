import { KeyDestroyedError, UnreadableEnvelopeError, type Sealer } from "../crypto/sealer.js";
import { refused } from "./forwarding.js";
import { deepFreeze, isPlainObject } from "../util/json.js";
import {
  InvalidEventError,
  PURGED_EVENT_TYPE,
  type EventData,
  type EventStore,
  type PurgedEventData,
  type RecordedEvent,
  type Subscription,
  type SubscriptionItem,
} from "./types.js";

/** The field of a sealed event's data that holds the envelope of its content. */
export const SEALED_FIELD = "$sealed";

/**
 * Which part of an event's data is content, and how to put it back: handed in by the assembly
 * (the decisions live in src/domain/content-fields.ts, a layer above this one).
 */
export interface ContentPolicy {
  /** The content to seal and the rest; undefined stores the event as it is. */
  split(type: string, data: unknown): { clear: Record<string, unknown>; content: unknown } | undefined;
  join(clear: Record<string, unknown>, content: unknown): unknown;
}

/**
 * Encryption at rest: each event's content is sealed for its stream before the store sees it, and
 * opened again for every reader. Purging streams destroys their data keys first, so what any copy
 * of the log still holds of them (a WAL, a backup, EventStoreDB before its scavenge) cannot be read.
 * Schema checks stay outside this wrapper: they look at plaintext.
 */
export function withEncryption(store: EventStore, sealer: Sealer, policy: ContentPolicy): EventStore {
  // The embedded store hands one frozen object to every reader: each is opened once, and its opened copy shared.
  const opened = new WeakMap<RecordedEvent, RecordedEvent>();

  const envelopeOf = (data: unknown): string | undefined => {
    if (!isPlainObject(data)) return undefined;
    const value = data[SEALED_FIELD];
    return sealer.isEnvelope(value) ? value : undefined;
  };

  const seal = (stream: string, event: EventData): EventData => {
    const split = policy.split(event.type, event.data);
    if (!split) return event;
    return { ...event, data: { ...split.clear, [SEALED_FIELD]: sealer.seal(stream, JSON.stringify(split.content)) } };
  };

  const open = (event: RecordedEvent): RecordedEvent => {
    const envelope = envelopeOf(event.data);
    if (envelope === undefined) return event;
    const cached = opened.get(event);
    if (cached) return cached;
    const result = Object.freeze(openEvent(event, envelope));
    opened.set(event, result);
    return result;
  };

  const openEvent = (event: RecordedEvent, envelope: string): RecordedEvent => {
    let plaintext: string;
    try {
      plaintext = sealer.open(event.streamId, envelope);
    } catch (error) {
      // Its stream was purged: the same tombstone the embedded store leaves, which every fold skips.
      if (error instanceof KeyDestroyedError) return { ...event, type: PURGED_EVENT_TYPE, data: { purged_type: event.type } satisfies PurgedEventData };
      if (error instanceof UnreadableEnvelopeError) throw new InvalidEventError(event.streamId, event.revision, event.type, error.message, event.position);
      throw error;
    }
    const { [SEALED_FIELD]: _sealed, ...clear } = isPlainObject(event.data) ? event.data : {};
    // Frozen through, as the store's own events are: every reader of this event shares the one opened copy.
    return { ...event, data: deepFreeze(policy.join(clear, JSON.parse(plaintext))) };
  };

  const openAll = (events: RecordedEvent[]): RecordedEvent[] => events.map(open);

  return {
    kind: store.kind,
    // Synchronous up to the store's call: appends issued in one turn still commit together, in order.
    append: (stream, events, expected, options) => {
      let sealed: EventData[];
      try {
        sealed = events.map((e) => seal(stream, e));
      } catch (error) {
        return refused(options, error);
      }
      // `dataLengths` then counts sealed text, a little more than the plaintext: close enough for the accounting it serves.
      return store.append(stream, sealed, expected, options);
    },
    readStream: (stream, options) => store.readStream(stream, options).then(openAll),
    readAll: (options) => store.readAll(options).then(openAll),
    whenDurable: () => store.whenDurable(),
    headPosition: () => store.headPosition(),
    subscribeToStream: (stream, options) => opening(store.subscribeToStream(stream, options), open),
    subscribeToAll: (options) => opening(store.subscribeToAll(options), open),
    purgeStreams: async (streams) => {
      const keyIds = new Set<string>();
      for (const stream of streams) {
        for (const event of await store.readStream(stream)) {
          const envelope = envelopeOf(event.data);
          if (envelope !== undefined) keyIds.add(sealer.keyIdOf(envelope));
        }
      }
      // Keys first: once they are gone, the content is unreadable even where the store keeps bytes.
      sealer.destroy([...keyIds]);
      await store.purgeStreams(streams);
    },
    close: () => store.close(),
  };
}

/** A subscription whose events are opened as they are delivered. */
function opening(subscription: Subscription, open: (event: RecordedEvent) => RecordedEvent): Subscription {
  const openItem = (item: SubscriptionItem): SubscriptionItem => (item.kind === "event" ? { kind: "event", event: open(item.event) } : item);
  return {
    close: () => subscription.close(),
    [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
      const inner = subscription[Symbol.asyncIterator]();
      return {
        next: async () => {
          const result = await inner.next();
          return result.done ? result : { done: false, value: openItem(result.value) };
        },
        return: async (value?: unknown) => (inner.return ? inner.return(value) : { done: true, value: undefined }),
      };
    },
  };
}
