import type { ZodType } from "zod";
import { InvalidEventError, type EventData, type EventStore } from "./types.js";
import { refused, withAppend } from "./forwarding.js";

/** Finds the schema of an event type; undefined means the type is not in the catalogue. */
export type SchemaLookup = (type: string) => ZodType | undefined;

const NONE: ReadonlySet<string> = new Set();

/** Refuses a type not in the catalogue, then data its schema refuses (unless the type's data goes unchecked). */
function check(schemaFor: SchemaLookup, unchecked: ReadonlySet<string>, stream: string, type: string, data: unknown): void {
  const schema = schemaFor(type);
  if (!schema) throw new InvalidEventError(stream, undefined, type, "unknown event type");
  if (unchecked.has(type)) return;
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length ? `${issue.path.join(".")}: ` : "";
    throw new InvalidEventError(stream, undefined, type, `${where}${issue?.message ?? "invalid data"}`);
  }
}

/**
 * Wraps a store so that every event is checked against its schema when it is written: the store boundary.
 * The types in `unchecked` are only checked to be in the catalogue: the test suite checks their producers.
 * Reads trust the log (nothing else enters it through this server unchecked), so the read path pays no schema
 * check per event and per reader; an event whose data cannot be parsed at all is still an InvalidEventError
 * naming its stream and revision, raised by the adapter that parses it.
 */
export function withSchemas(store: EventStore, schemaFor: SchemaLookup, unchecked: ReadonlySet<string> = NONE): EventStore {
  // Not an async function: the store's promise is handed back as it is (one promise fewer per append).
  return withAppend(store, (stream, events: EventData[], expected, options) => {
    try {
      for (const e of events) check(schemaFor, unchecked, stream, e.type, e.data);
    } catch (error) {
      return refused(options, error);
    }
    return store.append(stream, events, expected, options);
  });
}
