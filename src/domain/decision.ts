import type { EventData } from "../eventstore/types.js";

/**
 * What a decider answers to a command: the events to append (none = nothing to do), or a refusal
 * with the HTTP status and detail the API reports.
 */
export type Decision = { ok: true; events: EventData[] } | { ok: false; status: 404 | 409 | 422; detail: string };
