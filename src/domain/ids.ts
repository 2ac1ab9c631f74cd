import * as z from "zod";
import { validate as isUuid } from "uuid";

/**
 * UUIDs are case-insensitive. The log, the read models and every answer hold the lower-case form,
 * made once where an id enters (the request schemas of each edge); the application core compares
 * ids as they are.
 */
export const canonicalId = (id: string): string => id.toLowerCase();

/** A UUID or another name (a graph id, an A2A task id the client made up): only a UUID is canonicalised. */
export const canonicalIfUuid = (id: string): string => (isUuid(id) ? canonicalId(id) : id);

export { isUuid };

/** An id in a request: a UUID, answered 422 otherwise, canonical once parsed. */
export const UuidSchema = z.uuid({ error: "must be a UUID" }).overwrite(canonicalId);

/** An assistant named by its id or its graph's id: canonical when it is a UUID. */
export const AssistantRefSchema = z.string().overwrite(canonicalIfUuid);
