import type { z } from "zod";

/**
 * The union of `{type, data}` events a catalogue of zod schemas describes, so that a fold's
 * `switch (event.type)` narrows `data` to that event's schema.
 */
export type EventsOf<Schemas extends Record<string, z.ZodType>> = {
  [K in keyof Schemas & string]: { type: K; data: z.infer<Schemas[K]> };
}[keyof Schemas & string];
