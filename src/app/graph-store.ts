/**
 * LangGraph's `BaseStore` on the event log: what a graph gets as `config.store`, `getStore()` and
 * the runtime's `store`. One instance per run, so every write it makes is an event attributed to
 * that run (`run_id`, `thread_id` in the event). Reads and writes go through the same StoreService
 * as the HTTP API: a graph and a client see the same items.
 */
import {
  BaseStore,
  InvalidNamespaceError,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import type { StoreService } from "./store.js";
import { namespaceError, type Attribution, type StoreItemState } from "../domain/store.js";
import type { JsonObject } from "../domain/json.js";
import { DomainError } from "../domain/errors.js";

const toItem = (s: StoreItemState): Item => ({
  namespace: s.namespace,
  key: s.key,
  value: s.value,
  createdAt: new Date(s.created_at),
  updatedAt: new Date(s.updated_at),
});

function checkNamespace(namespace: string[], allowEmpty: boolean): void {
  const error = namespaceError(namespace, { allowEmpty });
  if (error) throw new InvalidNamespaceError(error);
}

/** The service's refusals (DomainError) become plain errors inside a graph. */
async function unwrap<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DomainError) throw new Error(error.detail);
    throw error;
  }
}

export class EventSourcedStore extends BaseStore {
  constructor(
    private readonly service: StoreService,
    private readonly by: Attribution = {},
  ) {
    super();
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    // In order: a get after a put of the same batch sees the put.
    for (const op of operations) results.push(await unwrap(this.run(op)));
    return results as OperationResults<Op>;
  }

  private async run(op: Operation): Promise<unknown> {
    if ("namespacePrefix" in op) {
      const s = op as SearchOperation & { refreshTtl?: boolean };
      checkNamespace(s.namespacePrefix, true);
      const hits = await this.service.search({
        namespacePrefix: s.namespacePrefix,
        filter: s.filter,
        limit: s.limit ?? 10,
        offset: s.offset ?? 0,
        query: s.query,
        refreshTtl: s.refreshTtl,
      });
      return hits.map((h): SearchItem => ({ ...toItem(h.item), ...(h.score === null ? {} : { score: h.score }) }));
    }
    if ("matchConditions" in op || ("limit" in op && !("key" in op))) {
      const l = op as ListNamespacesOperation;
      const prefix = l.matchConditions?.find((c) => c.matchType === "prefix")?.path;
      const suffix = l.matchConditions?.find((c) => c.matchType === "suffix")?.path;
      return this.service.listNamespaces({ prefix, suffix, maxDepth: l.maxDepth, limit: l.limit ?? 100, offset: l.offset ?? 0 });
    }
    if ("value" in op) {
      const p = op as PutOperation & { ttl?: number | null };
      if (p.value === null) {
        checkNamespace(p.namespace, true);
        await this.service.delete(p.namespace, p.key, this.by);
        return undefined;
      }
      checkNamespace(p.namespace, false);
      await this.service.put({ namespace: p.namespace, key: p.key, value: p.value as JsonObject, index: p.index, ttl: p.ttl }, this.by);
      return undefined;
    }
    const g = op as GetOperation & { refreshTtl?: boolean };
    checkNamespace(g.namespace, true);
    const item = await this.service.get(g.namespace, g.key, { refreshTtl: g.refreshTtl });
    return item ? toItem(item) : null;
  }
}
