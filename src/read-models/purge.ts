import { truncateWal } from "../eventstore/sqlite-erase.js";
import type { ReadModels } from "./all.js";

/**
 * Once the read models have folded a purge (its rows are rewritten or deleted, their freed bytes
 * zeroed): the WAL frames that still held the rows as they were are cut off.
 */
export function eraseLeftoversOfPurge(readModels: ReadModels): void {
  truncateWal(readModels.runner.db);
}
