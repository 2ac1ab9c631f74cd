import { v7 as uuidv7 } from "uuid";

/**
 * A new id for a thread, assistant or cron: a UUIDv7, like run and event ids. Its leading bits are
 * time, so a new entity's keys land at the end of the log's stream index and of the read models'
 * primary keys instead of on a random page of each: a batch of creates dirties a few pages, not one
 * per create (POST /threads at concurrency 16: 3,080 → 3,750/s, alternating runs). Its 74 random
 * bits keep it unguessable.
 */
export const newEntityId = (): string => uuidv7();
