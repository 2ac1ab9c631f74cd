import { KeyDestroyedError, UnreadableEnvelopeError, type Sealer } from "../crypto/sealer.js";
import { refused } from "./forwarding.js";
import { deepFreeze, isPlainObject } from "../util/json.js";
import { dataTextOf } from "./data-text.js";
import { jsonTextOf } from "./json-text.js";
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

/**
 * The field of a sealed event's data that holds the envelope: of the whole data (a JSON object), or, in envelopes
 * written before the whole was sealed, of its content parts (a JSON array, joined with the clear fields).
 */
export const SEALED_FIELD = "$sealed";
/** How the sealed field shows in an event's JSON text. */
const SEALED_KEY_TEXT = JSON.stringify(SEALED_FIELD) + ":";

/**
 * Which part of an event's data stays in clear: handed in by the assembly (the decisions live in
 * src/domain/content-fields.ts, a layer above this one).
 */
export interface ContentPolicy {
  /**
   * The data without its content, stored beside the sealed whole: a fresh object, which the wrapper completes with the
   * envelope's field. Undefined stores the event as it is.
   */
  clearPart(type: string, data: unknown): Record<string, unknown> | undefined;
  /** The data from its clear part and the content parts of an envelope written before the whole data was sealed. */
  join(clear: Record<string, unknown>, content: unknown): unknown;
  /** Streams that are destroyed with `stream` and, once this event of it is sealed, seal with its key (see Sealer.shareKey). */
  keySharers?(stream: string, type: string, data: unknown): readonly string[];
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
  /**
   * The embedded store owns its file and holds the events this process appended, as given (EventData.storedData
   * goes to the file): their readers need no decryption, so the sealer need not remember what it sealed for them.
   */
  const holdsAppended = store.kind === "sqlite";

  const envelopeOf = (data: unknown): string | undefined => {
    if (!isPlainObject(data)) return undefined;
    const value = data[SEALED_FIELD];
    return sealer.isEnvelope(value) ? value : undefined;
  };

  // What the log stores is sealed (the caller's own stored form, when it gives one); the data as given stays for the store to hold.
  const seal = (stream: string, event: EventData): EventData => {
    const given = event.storedData === undefined;
    const stored = given ? event.data : event.storedData;
    const clear = policy.clearPart(event.type, stored);
    const text = clear && jsonTextOf(stored);
    if (clear === undefined || text === undefined) return event;
    const envelope = sealer.seal(stream, text, { remember: !holdsAppended });
    const sharers = policy.keySharers?.(stream, event.type, event.data);
    if (sharers && sharers.length > 0) sealer.shareKey(stream, sharers);
    const storedText = completeStoredForm(clear, envelope);
    // The data's text, made once: sealed here, and held by the store for this process's readers.
    return { ...event, storedData: clear, storedText, dataText: given ? text : event.dataText };
  };

  const open = (event: RecordedEvent): RecordedEvent => {
    // An event held as it was appended (its data's text at hand, without a sealed field) is read as it is, unparsed.
    const text = dataTextOf(event);
    if (text !== undefined && !text.includes(SEALED_KEY_TEXT)) return event;
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
    const opened: unknown = JSON.parse(plaintext);
    let data = opened;
    if (Array.isArray(opened)) {
      const { [SEALED_FIELD]: _sealed, ...clear } = isPlainObject(event.data) ? event.data : {};
      data = policy.join(clear, opened);
    }
    // Frozen through, as the store's own events are: every reader of this event shares the one opened copy.
    return { ...event, data: deepFreeze(data) };
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
        for (const event of await store.readStream(stream, { fromStorage: true })) {
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

/**
 * Completes `clear` (a fresh object the policy made for this event) into the event's stored form, its clear part with
 * the envelope as the last field, and returns the stored form's text: the clear part's with that field appended, so
 * the envelope (most of the text) is not serialised a second time (an envelope is ASCII that a JSON string carries
 * unescaped).
 */
function completeStoredForm(clear: Record<string, unknown>, envelope: string): string {
  // A clear part with a field of that name keeps it in its own place: serialised as a whole.
  if (Object.hasOwn(clear, SEALED_FIELD)) {
    clear[SEALED_FIELD] = envelope;
    return JSON.stringify(clear);
  }
  const clearText = JSON.stringify(clear);
  clear[SEALED_FIELD] = envelope;
  const field = `${SEALED_KEY_TEXT}"${envelope}"`;
  return clearText === "{}" ? `{${field}}` : `${clearText.slice(0, -1)},${field}}`;
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
