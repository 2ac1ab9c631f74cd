import type { ZodType } from "zod";
import { InvalidEventError, type EventData, type EventStore } from "./types.js";
import { refused, withAppend } from "./forwarding.js";
import { describeViolation, findLimitViolation, InputLimitError, LOG_LIMITS } from "../util/json-limits.js";

/** Event data beyond LOG_LIMITS: refused at the store boundary, answered as bad input (422) where a request caused it. */
export class EventLimitError extends InputLimitError {
  override name = "EventLimitError";
  constructor(
    readonly stream: string,
    readonly eventType: string,
    violation: ConstructorParameters<typeof InputLimitError>[0],
  ) {
    super(violation);
    this.message = `Event ${eventType} for "${stream}" refused: ${describeViolation(violation)}`;
  }
}

/** Finds the schema of an event type; undefined means the type is not in the catalogue. */
export type SchemaLookup = (type: string) => ZodType | undefined;

const NONE: ReadonlySet<string> = new Set();

/**
 * Refuses a type not in the catalogue, data nested beyond what every fold can read back (any type: a
 * graph's own values included), then data its schema refuses (unless the type's data goes unchecked).
 */
function check(schemaFor: SchemaLookup, unchecked: ReadonlySet<string>, stream: string, type: string, data: unknown): void {
  const schema = schemaFor(type);
  if (!schema) throw new InvalidEventError(stream, undefined, type, "unknown event type");
  const violation = findLimitViolation(data, LOG_LIMITS, "data");
  if (violation) throw new EventLimitError(stream, type, violation);
  if (unchecked.has(type)) return;
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length ? `${issue.path.join(".")}: ` : "";
    throw new InvalidEventError(stream, undefined, type, `${where}${issue?.message ?? "invalid data"}`);
  }
}

/**
 * Wraps a store so that every event is checked when it is written: the store boundary, the last line of
 * the rule that the log only accepts what every fold can read.
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
