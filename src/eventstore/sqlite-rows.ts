/** How an events row becomes a RecordedEvent: parsed once, frozen, and named when its JSON is broken. */
import { deepFreeze } from "../util/json.js";
import { dataTextProperty } from "./data-text.js";
import { InvalidEventError, type RecordedEvent } from "./types.js";

/** Rows are read as arrays (`raw()`), in this column order. */
export type Row = [position: bigint, streamId: string, revision: bigint, eventId: string, type: string, data: string, metadata: string | null, created: bigint];
export const COLUMNS = "position, stream_id, revision, event_id, type, data, metadata, created";

/**
 * The event of a row. The result is deep-frozen: the store may hand one parsed event to every reader in the
 * process (live subscribers, recent reads), so no reader can change what another one sees.
 * Data that is not JSON (the log was written around the store) is an InvalidEventError naming stream and revision.
 */
export function toRecorded(row: Row): RecordedEvent {
  return recordedEvent({
    position: row[0],
    streamId: row[1],
    revision: row[2],
    id: row[3],
    type: row[4],
    data: row[5],
    metadata: row[6],
    created: Number(row[7]),
  });
}

/** An event as the store holds it: its data and metadata as JSON text, its time in epoch milliseconds. */
export interface StoredEventText {
  readonly position: bigint;
  readonly streamId: string;
  readonly revision: bigint;
  readonly id: string;
  readonly type: string;
  readonly data: string;
  readonly metadata: string | null;
  readonly created: number;
}

export function recordedEvent(e: StoredEventText): RecordedEvent {
  const { position, streamId, revision, id, type } = e;
  return Object.freeze({ streamId, id, type, revision, position, data: dataOf(e), metadata: metadataOf(e), created: new Date(e.created) });
}

const EMPTY: Record<string, unknown> = Object.freeze({});

function dataOf(e: StoredEventText): unknown {
  return parse(e.data, e, "data");
}

function metadataOf(e: StoredEventText): Record<string, unknown> {
  return e.metadata === null ? EMPTY : (parse(e.metadata, e, "metadata") as Record<string, unknown>);
}

function parse(json: string, { position, streamId: stream, revision, type }: StoredEventText, what: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new InvalidEventError(stream, revision, type, `${what} is not valid JSON: ${(error as Error).message}`, position);
  }
  try {
    return deepFreeze(value);
  } catch (error) {
    // Nested deeper than the stack can walk (written around the store's checks): unreadable like broken JSON.
    if (error instanceof RangeError) throw new InvalidEventError(stream, revision, type, `${what} is nested too deeply to read: ${error.message}`, position);
    throw error;
  }
}

/**
 * An event this process appended and committed: its text is what the store made of data that passed its
 * checks, so it parses. Data and metadata are parsed (and frozen) on first use, not before: a reader that
 * passes the data on as JSON takes its text (dataTextOf, data-text.ts) and never parses it, as a run's SSE
 * tail does with each streamed token. Data and metadata are own enumerable properties, so the event reads
 * and copies as one from the table does.
 */
export function ownRecordedEvent(e: StoredEventText): RecordedEvent {
  const { position, streamId, revision, id, type } = e;
  let data: { value: unknown } | undefined;
  let metadata: Record<string, unknown> | undefined;
  const event = { streamId, id, type, revision, position } as RecordedEvent;
  Object.defineProperties(event, {
    data: { enumerable: true, get: () => (data ??= { value: dataOf(e) }).value },
    metadata: { enumerable: true, get: () => (metadata ??= metadataOf(e)) },
    created: { enumerable: true, value: new Date(e.created) },
    ...dataTextProperty(e.data),
  });
  return Object.freeze(event);
}
