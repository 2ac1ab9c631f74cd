import type { RecordedEvent } from "./types.js";

/**
 * The JSON text of an event's data, kept on the event where an adapter holds it at no cost (the SQLite store,
 * for the events this process appended), so that a reader passing the data on as JSON need not parse it and
 * serialise it again. A non-enumerable key: a copy made by spreading the event (a wrapper that changes its
 * data) does not carry a text that no longer matches.
 */
const DATA_TEXT = Symbol("data text");

/** The property descriptors that give an event its data's text (for Object.defineProperties). */
export function dataTextProperty(text: string): PropertyDescriptorMap {
  return { [DATA_TEXT]: { value: text } };
}

/** The JSON text of `event`'s data, when its adapter kept it; undefined otherwise. */
export function dataTextOf(event: RecordedEvent): string | undefined {
  return (event as { [DATA_TEXT]?: string })[DATA_TEXT];
}
