import type { AppContext } from "./context.js";

/**
 * Metadata keys named in LANGGRAPH_AES_JSON_KEYS are sealed in the log with the content, and so are not searchable,
 * as on the official server (where their stored values are ciphertext that no filter equals): a caller's search or
 * count of threads, assistants or crons whose `metadata` filter names one of them matches nothing. The server's own
 * searches (custom-auth filters, an assistant's threads on its deletion) stay as they are.
 */
export function filtersOnSealedMetadata(ctx: AppContext, metadata: Record<string, unknown> | undefined): boolean {
  const sealed = ctx.config.encryption?.jsonKeys;
  if (!sealed || sealed.length === 0 || metadata === undefined) return false;
  return sealed.some((key) => Object.hasOwn(metadata, key));
}
