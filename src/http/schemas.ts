import * as z from "zod";
import { JsonObjectSchema } from "../util/json.js";
import { RunnableConfigSchema } from "../domain/run-request.js";
import { UuidSchema } from "../domain/ids.js";

/** Request pieces shared by several routes. */
export const JsonObject = JsonObjectSchema;
/** An id in a path, query or body: a UUID, lower-cased once parsed (see src/domain/ids.ts). */
export const Uuid = UuidSchema;
export const IfExists = z.enum(["raise", "do_nothing"]);
export const SortOrder = z.enum(["asc", "desc"]);
export const Limit = z.number().int().min(1).max(1000).default(10);
export const Offset = z.number().int().min(0).default(0);

export const RunnableConfig = RunnableConfigSchema;

export const ThreadIdParams = z.object({ thread_id: Uuid });

/** Sets the PY server's pagination headers from the true total. */
export function paginationHeaders(offset: number, pageLength: number, total: number): Record<string, string> {
  const headers: Record<string, string> = { "X-Pagination-Total": String(total) };
  if (offset + pageLength < total) headers["X-Pagination-Next"] = String(offset + pageLength);
  return headers;
}
