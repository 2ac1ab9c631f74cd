/**
 * Every assistant a caller may see, for edges that show the whole catalogue at once (MCP's
 * `tools/list`): custom auth's `assistants:search` runs for the caller and its filters apply in
 * the query, as on `POST /assistants/search`.
 */
import type { AppContext } from "./context.js";
import type { Assistant } from "../domain/assistants.js";
import { authorize, type Caller } from "./auth/caller.js";
import { searchAssistants } from "./assistants.js";

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
  return all.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.assistant_id < b.assistant_id ? -1 : a.assistant_id > b.assistant_id ? 1 : 0));
}
