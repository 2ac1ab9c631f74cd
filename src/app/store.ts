/**
 * Application service of the Store: commands decided on the read model and appended to the item's
 * own stream, queries on the read model. Used by the HTTP routes and, through the BaseStore
 * adapter (src/app/graph-store.ts), by graphs: both read and write the same items.
 */
import type { EventData, EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import type { NamespaceQuery, StoreSearchHit } from "../read-models/store-items.js";
import type { AuthFilters } from "../read-models/auth-filters.js";
import {
  decideDelete,
  decidePut,
  decideRefresh,
  namespaceError,
  parseValueFilter,
  storeItemStream,
  textsToEmbed,
  type Attribution,
  type StoreItemState,
  type StoreVector,
} from "../domain/store.js";
import type { JsonObject } from "../domain/json.js";
import type { StoreIndex } from "../runtime/store-index.js";
import type { Clock } from "../context/clock.js";
import { CommandPipeline } from "../commands/pipeline.js";
import { invalid } from "../domain/errors.js";

export interface StoreServiceOptions {
  store: EventStore;
  readModels: ReadModels;
  clock: Clock;
  /** `store.index` of langgraph.json (semantic search); undefined = none. */
  index?: StoreIndex;
  /** `store.ttl.refresh_on_read`: reads refresh TTLs unless they say otherwise (default true). */
  refreshOnRead?: boolean;
  /** `store.ttl.default_ttl`, minutes: the TTL of items put without one. */
  defaultTtl?: number | null;
}

export interface PutCommand {
  namespace: string[];
  key: string;
  value: JsonObject;
  /** false: not indexed; a list of field paths; null/undefined: the configured fields. */
  index?: false | string[] | null;
  /** Minutes; null = kept until deleted; undefined = the configured default. */
  ttl?: number | null;
}

export interface SearchCommand {
  namespacePrefix: string[];
  filter?: Record<string, unknown>;
  limit: number;
  offset: number;
  query?: string;
  refreshTtl?: boolean;
  /** Only namespaces under this prefix (see StoreSearchQuery.within). */
  within?: readonly string[];
  /** Custom auth's store filters (see StoreSearchQuery.authFilters). */
  authFilters?: AuthFilters;
}

/** A namespace that breaks the rules (empty label, period): the official server's 422. */
export function assertNamespace(namespace: readonly string[], options: { allowEmpty?: boolean } = {}): void {
  const error = namespaceError(namespace, options);
  if (error) throw invalid(error);
}

export class StoreService {
  private readonly commands: CommandPipeline;

  constructor(private readonly o: StoreServiceOptions) {
    this.commands = new CommandPipeline(o.store, o.readModels.runner);
  }

  get clock(): Clock {
    return this.o.clock;
  }

  async put(cmd: PutCommand, by: Attribution = {}): Promise<void> {
    assertNamespace(cmd.namespace);
    const ttl = cmd.ttl === undefined ? (this.o.defaultTtl ?? null) : cmd.ttl;
    if (ttl !== null && !(ttl > 0)) throw invalid("ttl: expected a positive number of minutes or null");
    const vectors = await this.embed(cmd);
    await this.append(storeItemStream(cmd.namespace, cmd.key), decidePut({ ...cmd, ttl_minutes: ttl, vectors }, this.o.clock.now(), by));
  }

  async delete(namespace: string[], key: string, by: Attribution = {}): Promise<void> {
    const state = await this.loadConsistent(namespace, key);
    await this.append(storeItemStream(namespace, key), decideDelete(state, this.o.clock.now(), by));
  }

  /** The live item, its TTL refreshed when asked (or by default, per `refresh_on_read`). */
  async get(namespace: string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<StoreItemState | undefined> {
    const now = this.o.clock.now();
    await this.loadConsistent(namespace, key);
    const item = this.o.readModels.storeItems.get(namespace, key, now);
    if (item && this.refreshes(options.refreshTtl)) await this.append(storeItemStream(namespace, key), decideRefresh(item, now));
    return item;
  }

  async search(cmd: SearchCommand): Promise<StoreSearchHit[]> {
    let conditions;
    try {
      conditions = parseValueFilter(cmd.filter ?? {});
    } catch (error) {
      throw invalid((error as Error).message);
    }
    const queryVector = cmd.query && this.o.index ? await this.o.index.embedQuery(cmd.query) : undefined;
    const now = this.o.clock.now();
    const hits = this.o.readModels.storeItems.search({
      namespacePrefix: cmd.namespacePrefix,
      conditions,
      limit: cmd.limit,
      offset: cmd.offset,
      nowMs: now,
      queryVector,
      within: cmd.within,
      authFilters: cmd.authFilters,
    });
    if (this.refreshes(cmd.refreshTtl)) {
      await Promise.all(hits.map((h) => this.append(storeItemStream(h.item.namespace, h.item.key), decideRefresh(h.item, now))));
    }
    return hits;
  }

  listNamespaces(q: NamespaceQuery): string[][] {
    return this.o.readModels.storeItems.listNamespaces(q);
  }

  /** Deletes every item (development truncate): one StoreItemDeleted each. Returns how many. */
  async truncate(): Promise<number> {
    let count = 0;
    let after: { nsPath: string; key: string } | undefined;
    const now = this.o.clock.now();
    for (;;) {
      const page = this.o.readModels.storeItems.page(after, 200);
      if (page.length === 0) return count;
      for (const item of page) {
        // Expired or not: the truncate leaves nothing behind.
        await this.append(storeItemStream(item.namespace, item.key), decideDelete({ ...item, expires_at: null }, now, {}, "truncate"));
        count++;
      }
      const last = page[page.length - 1];
      after = { nsPath: last.namespace.map((l) => `${l}.`).join(""), key: last.key };
    }
  }

  /**
   * Erases an item (a user's erasure): a StoreItemDeleted first, so the read model drops the row
   * and a store that deletes softly folds the item away again on a rebuild, then the item's stream
   * leaves the log (the encrypting store destroys its data key first). False when there was none.
   */
  async purge(namespace: string[], key: string, by: Attribution = {}): Promise<boolean> {
    const state = await this.loadConsistent(namespace, key);
    if (!state) return false;
    const stream = storeItemStream(namespace, key);
    // Expired or not: its content is still in the log.
    await this.append(stream, decideDelete({ ...state, expires_at: null }, this.o.clock.now(), by, "erase"));
    await this.o.store.purgeStreams([stream]);
    return true;
  }

  /** Every item, expired or not, whose namespace starts with `prefix` (non-empty). */
  itemsUnder(prefix: readonly string[]): { namespace: string[]; key: string }[] {
    return this.o.readModels.storeItems.itemsUnder(prefix);
  }

  private refreshes(asked: boolean | undefined): boolean {
    return asked ?? this.o.refreshOnRead ?? true;
  }

  /** The item as the local read model has it; a miss first catches up with its stream (another process may have written it). */
  private async loadConsistent(namespace: string[], key: string): Promise<StoreItemState | undefined> {
    const found = this.o.readModels.storeItems.load(namespace, key);
    if (found) return found;
    await this.commands.catchUpWithStream(storeItemStream(namespace, key));
    return this.o.readModels.storeItems.load(namespace, key);
  }

  /** Last writer wins for puts and deletes (as in the official stores); read-your-writes after each append. */
  private async append(stream: string, events: EventData[]): Promise<void> {
    if (events.length === 0) return;
    await this.commands.append({ stream, events, expected: "any", waitFor: "fold" });
  }

  private async embed(cmd: PutCommand): Promise<StoreVector[]> {
    const index = this.o.index;
    if (!index || cmd.index === false) return [];
    const texts = textsToEmbed(cmd.value, cmd.index ?? index.fields);
    if (texts.length === 0) return [];
    const vectors = await index.embedDocuments(texts.map((t) => t.text));
    return texts.map((t, i) => ({ field: t.field, vector: vectors[i] }));
  }
}

/** The wire shape of an item (snake_case dates, as both official servers send). */
export function itemToWire(item: StoreItemState, score?: number | null): Record<string, unknown> {
  const wire: Record<string, unknown> = {
    namespace: item.namespace,
    key: item.key,
    value: item.value,
    created_at: item.created_at,
    updated_at: item.updated_at,
  };
  if (score !== undefined) wire.score = score;
  return wire;
}
