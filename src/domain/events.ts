import type { ZodType } from "zod";
import { assistantEventSchemas } from "./assistants.js";
import { threadEventSchemas } from "./threads.js";
import { checkpointEventCatalogue } from "./checkpoint-events.js";
import { runEventSchemas } from "./runs.js";
import { storeEventSchemas } from "./store.js";
import { largeJsonEventSchemas } from "../eventstore/chunked-append.js";
import { webhookEventSchemas } from "./webhooks.js";
import { cronEventSchemas } from "./crons.js";
import { a2aPushEventSchemas } from "./a2a-push.js";
import { idempotencyEventSchemas } from "./idempotency.js";

/** The event catalogue: every event type the log may hold, with the schema of its data. */
const catalogue = {
  ...assistantEventSchemas,
  ...threadEventSchemas,
  ...checkpointEventCatalogue,
  ...runEventSchemas,
  ...storeEventSchemas,
  ...largeJsonEventSchemas,
  ...webhookEventSchemas,
  ...cronEventSchemas,
  ...a2aPushEventSchemas,
  ...idempotencyEventSchemas,
} satisfies Record<string, ZodType>;

/** The catalogue's type: event type → zod schema of its data (see src/domain/event-of.ts). */
export type EventCatalogue = typeof catalogue;

/**
 * The events a run writes per graph step: its checkpoints and pending writes (one constructor each, in
 * the checkpoint codec) and its output chunks (`{event, data}` with data any JSON). The server checks
 * them only when EVENT_SCHEMA_CHECKS=all (as the test suite runs, so every graph the tests run has
 * its step events checked against these schemas): each check parses and copies the whole event,
 * on every step of every run. Every other event is checked on every append.
 */
export const STEP_EVENT_TYPES: ReadonlySet<string> = new Set(["CheckpointSaved", "PendingWritesSaved", "RunOutput"]);

const schemasByType: Record<string, ZodType> = catalogue;

export function schemaForEventType(type: string): ZodType | undefined {
  return Object.hasOwn(schemasByType, type) ? schemasByType[type] : undefined;
}
