import type { z } from "zod";
import type { EventCatalogue } from "./events.js";

/**
 * Typed events without casts. Every event is checked against its catalogue schema when it is appended
 * (src/eventstore/validating.ts; the step events when EVENT_SCHEMA_CHECKS=all, their producers are typed),
 * so the data of an event of type T read back from the log has the type its schema infers. These guards
 * only compare the type name: they never parse, so they cost a fold no more than `event.type === T`.
 */

/** Every event type of the catalogue (src/domain/events.ts). */
export type EventType = keyof EventCatalogue & string;

/** The data of an event of type T: what T's catalogue schema infers. */
export type EventDataOf<T extends EventType> = z.infer<EventCatalogue[T]>;

/** An event of type T with its typed data. */
export interface TypedEvent<T extends EventType> {
  type: T;
  data: EventDataOf<T>;
}

/** The shape the guards read: any event as written or as read (`EventData`, `RecordedEvent`, …). */
export interface AnyEvent {
  type: string;
  data: unknown;
}

/** Whether `event` is of type `type`, narrowing its `data` to that type's catalogue data. */
export function isEvent<E extends AnyEvent, T extends EventType>(event: E, type: T): event is E & TypedEvent<T> {
  return event.type === type;
}

/**
 * Whether `event` is of one of `types`, narrowing it to the union of their typed events (a `switch` on
 * its `type` then narrows further). For a handful of types: a linear scan of the list (on a hot path,
 * keep the list in a module constant rather than an array literal at the call).
 */
export function isEventOf<E extends AnyEvent, const T extends readonly EventType[]>(
  event: E,
  types: T,
): event is E & { [K in T[number]]: TypedEvent<K> }[T[number]] {
  const list: readonly string[] = types;
  return list.includes(event.type);
}
