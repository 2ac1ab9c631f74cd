/**
 * Which assistants a caller may see. Two questions, two handlers, as on the assistant routes:
 *  - the whole catalogue at once (MCP's `tools/list`): custom auth's `assistants:search` runs for
 *    the caller and its filters apply in the query, as on `POST /assistants/search`;
 *  - one assistant by id (GET /assistants/{id}, and every edge that runs one: REST runs, crons,
 *    A2A, MCP, protocol v2, the agent card): `assistants:read` runs and its filters hide it.
 * A hidden assistant answers as an unknown one does on each edge, so its existence is not revealed.
 */
import type { AppContext } from "./context.js";
import type { Assistant } from "../domain/assistants.js";
import { authorize, type Caller } from "./auth/caller.js";
import { assistantIdOf, findAssistantConsistent, searchAssistants } from "./assistants.js";
import { defaultAssistantId } from "../runtime/graph-catalogue.js";
import { filterMatches } from "../read-models/auth-filters.js";

const PAGE = 500;

/** Oldest first (creation time, then id), so a position in the list never changes when an assistant is added. */
export async function visibleAssistants(ctx: AppContext, caller: Caller): Promise<Assistant[]> {
  const { filters } = await authorize(caller, "assistants", "search", {});
  const all: Assistant[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const { page } = searchAssistants(ctx, { sort_by: "created_at", sort_order: "asc", limit: PAGE, offset }, filters);
    all.push(...page);
    if (page.length < PAGE) break;
  }
  // The same creation time (default assistants made together) is ordered by id, not by chance.
  return all.sort((a, b) =>
    a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.assistant_id < b.assistant_id ? -1 : a.assistant_id > b.assistant_id ? 1 : 0,
  );
}

/**
 * Whether the assistant is the one the server made for its graph at start (langgraph.json's, the
 * same for every user), not one a user created. Both marks are needed: its id is the graph's
 * deterministic default id, which no user can take while it exists, and its metadata still
 * carries the server's stamp; a `created_by: "system"` a client writes into its own assistant's
 * metadata alone is not enough.
 */
export function isGraphDefault(assistant: Assistant): boolean {
  return assistant.assistant_id === defaultAssistantId(assistant.graph_id) && assistant.metadata.created_by === "system";
}

/**
 * Runs custom auth's `assistants:read` for the caller on the assistant `idOrGraph` names (the
 * handler's refusal is thrown, as on GET /assistants/{id}) and tells whether its filters hide an
 * existing assistant. An unknown assistant is not "hidden": each caller answers it its own way,
 * and answers a hidden one the same way.
 *
 * A graph's default assistant is never hidden by filters (the handler still runs, and may refuse):
 * the server made it from langgraph.json, not a user, and the official servers let every user run
 * it; its routes show it by id too, so a run of it and a read of it always agree.
 */
export async function assistantHidden(ctx: AppContext, caller: Caller, idOrGraph: string): Promise<boolean> {
  const { filters } = await authorize(caller, "assistants", "read", { assistant_id: idOrGraph });
  if (!filters) return false;
  const id = assistantIdOf(ctx, idOrGraph);
  // The consistent lookup: an assistant another process just wrote must not slip past the check.
  const assistant = id === undefined ? undefined : await findAssistantConsistent(ctx, id);
  return assistant !== undefined && !isGraphDefault(assistant) && !filterMatches(assistant.metadata, filters);
}
