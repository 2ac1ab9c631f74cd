import type { RecordedEvent } from "../src/eventstore/types.js";
import { evolveAssistant, type AssistantEvent, type AssistantState } from "../src/domain/assistants.js";
import type { Projection } from "./projection.js";

const PREFIX = "assistant-";

/** Assistants by id, with their versions; deleted ones stay as tombstones (the API hides them). */
export const assistantsProjection: Projection<AssistantState> = {
  name: "assistants",
  streamPrefixes: [PREFIX],
  key: (event: RecordedEvent) => event.streamId.slice(PREFIX.length),
  evolve: (state, event) => evolveAssistant(state, { type: event.type, data: event.data } as AssistantEvent, event.revision),
};
