import type Database from "better-sqlite3";
import type { AllSubscriptionOptions, EventStore, RecordedEvent, Subscription, SubscriptionItem } from "../eventstore/types.js";
import { PUSH_DELIVERY_KEY_PREFIX } from "../domain/a2a-push.js";
import { RUN_ID_STREAM_PREFIXES, THREAD_ID_STREAM_PREFIXES } from "../domain/purge-scope.js";
import { THREAD_STREAM_PREFIX } from "../domain/threads.js";
import { WEBHOOK_STREAM_PREFIX } from "../domain/webhooks.js";

/**
 * EventStoreDB deletes softly: after a thread purge, its streams read as missing, but their events
 * stay in `$all` until the operator's next scavenge. A catch-up that starts before a purge (a
 * rebuild from position 0, a process that was down) would fold them again and bring the purged
 * thread's runs, values and metadata back into the read models. So before such a catch-up the
 * purges ahead of it are collected (their ThreadPurged records name the thread and its runs), and
 * every event of those streams that precedes its purge is left out. The SQLite store rewrites
 * purged events into tombstones in place: nothing to skip there.
 *
 * The purged ids live in a table of the read-model database, not in memory: there may be many.
 */

/** Page size of the scan for ThreadPurged records. */
const PAGE = 1000;

/** An A2A push delivery's stream: `webhook-a2a-{run_id}-{config_id}`. */
const PUSH_DELIVERY_STREAM_PREFIX = `${WEBHOOK_STREAM_PREFIX}${PUSH_DELIVERY_KEY_PREFIX}`;
/**
 * The stream categories a purge removes, each followed by the id of its thread or run; the longest first, so that
 * a category that starts with another's prefix (`run-input-`, `run-`) is told apart.
 */
const PURGED_CATEGORIES = [...THREAD_ID_STREAM_PREFIXES, ...RUN_ID_STREAM_PREFIXES, PUSH_DELIVERY_STREAM_PREFIX].sort((a, b) => b.length - a.length);
const UUID_LENGTH = 36;

/** The thread or run id a stream of a purgeable category belongs to (pure); undefined for any other stream. */
export function purgedOwnerOf(streamId: string): string | undefined {
  for (const prefix of PURGED_CATEGORIES) {
    if (!streamId.startsWith(prefix)) continue;
    const rest = streamId.slice(prefix.length);
    // `webhook-a2a-{run}-{config}`: the run id is the UUID that follows the prefix.
    return prefix === PUSH_DELIVERY_STREAM_PREFIX ? rest.slice(0, UUID_LENGTH) : rest;
  }
  return undefined;
}

/** Ids (thread and runs) whose events before `position` were purged; backed by a read-model table. */
export class PurgedContent {
  private readonly insert: Database.Statement<[string, string]>;
  private readonly lookup: Database.Statement<[string], string | undefined>;

  constructor(db: Database.Database) {
    db.exec("CREATE TABLE IF NOT EXISTS purged_content (owner TEXT PRIMARY KEY, purged_at_position TEXT NOT NULL) WITHOUT ROWID");
    this.insert = db.prepare(
      "INSERT INTO purged_content (owner, purged_at_position) VALUES (?, ?) ON CONFLICT (owner) DO UPDATE SET purged_at_position = excluded.purged_at_position",
    );
    this.lookup = db.prepare<[string], string | undefined>("SELECT purged_at_position FROM purged_content WHERE owner = ?").pluck();
  }

  /** Records the purges the log holds from `from` (inclusive) to its head. */
  async collect(store: EventStore, from: bigint | "start"): Promise<number> {
    let found = 0;
    let cursor: bigint | "start" = from;
    let seen = -1n;
    for (;;) {
      const page = await store.readAll({
        fromPosition: cursor,
        maxCount: PAGE,
        filter: { streamPrefixes: [THREAD_STREAM_PREFIX], eventTypes: ["ThreadPurged"] },
      });
      for (const event of page) {
        if (event.position <= seen) continue;
        seen = event.position;
        this.record(event);
        found++;
      }
      if (page.length < PAGE) return found;
      cursor = seen; // inclusive: the last one is skipped above
    }
  }

  record(purge: RecordedEvent): void {
    const data = purge.data as { thread_id?: unknown; run_ids?: unknown } | null;
    // A record this scan cannot read hides nothing (the fold quarantines it): never a reason for the read models to stop.
    if (typeof data?.thread_id !== "string") return;
    const runIds = Array.isArray(data.run_ids) ? data.run_ids.filter((id): id is string => typeof id === "string") : [];
    const at = purge.position.toString();
    for (const owner of [data.thread_id, ...runIds]) this.insert.run(owner, at);
  }

  /** Whether the event is content a later purge removed (its ThreadPurged record itself is not). */
  hides(event: RecordedEvent): boolean {
    const owner = purgedOwnerOf(event.streamId);
    if (owner === undefined) return false;
    const at = this.lookup.get(owner);
    return at !== undefined && event.position < BigInt(at);
  }
}

/**
 * `store.subscribeToAll(options)`, less the content of threads purged after the start (EventStoreDB
 * only; see above). The scan for purges runs when iteration begins.
 */
export function subscribeWithoutPurged(store: EventStore, db: Database.Database, options: AllSubscriptionOptions): Subscription {
  const from = options.fromPosition ?? "start";
  if (store.kind !== "esdb" || from === "end") return store.subscribeToAll(options);
  const purged = new PurgedContent(db);
  let inner: Subscription | undefined;
  let closed = false;
  return {
    async close() {
      closed = true;
      await inner?.close();
    },
    async *[Symbol.asyncIterator](): AsyncGenerator<SubscriptionItem> {
      await purged.collect(store, from);
      if (closed) return;
      inner = store.subscribeToAll(options);
      for await (const item of inner) {
        if (item.kind === "event" && purged.hides(item.event)) continue;
        yield item;
      }
    },
  };
}
