import { evolveAssistant, type AssistantEvent, type AssistantState } from "../src/domain/assistants.js";
import { aggregateProjection } from "./projection.js";

/** Assistants by id, with their versions; deleted ones stay as tombstones (the API hides them). */
export const assistantsProjection = aggregateProjection<AssistantState, AssistantEvent>("assistants", "assistant-", evolveAssistant);
