import type { ZodType } from "zod";
import { assistantEventSchemas } from "./assistants.js";
import { threadEventSchemas } from "./threads.js";
import { checkpointEventSchemas } from "./checkpoint-events.js";
import { runEventSchemas } from "./runs.js";
import { storeEventSchemas } from "./store.js";
import { largeJsonEventSchemas } from "../eventstore/chunked-append.js";
import { webhookEventSchemas } from "./webhooks.js";
import { cronEventSchemas } from "./crons.js";
import { a2aPushEventSchemas } from "./a2a-push.js";
import { idempotencyEventSchemas } from "./idempotency.js";

/** The event catalogue: every event type the log may hold, with the schema of its data. */
const catalogue: Record<string, ZodType> = {
  ...assistantEventSchemas, ...threadEventSchemas, ...checkpointEventSchemas, ...runEventSchemas, ...storeEventSchemas,
  ...largeJsonEventSchemas, ...webhookEventSchemas, ...cronEventSchemas, ...a2aPushEventSchemas, ...idempotencyEventSchemas,
};

export function schemaForEventType(type: string): ZodType | undefined {
  return Object.hasOwn(catalogue, type) ? catalogue[type] : undefined;
}
