import type { EventData } from "../eventstore/types.js";
import type { FailureKind } from "./errors.js";

/**
 * What a decider answers to a command: the events to append (none = nothing to do), or a refusal
 * with its kind and the detail the API reports.
 */
export type Decision = { ok: true; events: EventData[] } | { ok: false; kind: Exclude<FailureKind, "precondition">; detail: string };
