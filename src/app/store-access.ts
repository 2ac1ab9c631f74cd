/**
 * The Store as the edges reach it, on behalf of a caller: each operation runs custom auth's
 * `store:<action>` handler first. As in the official servers, a store handler may rewrite
 * `value.namespace` (e.g. prepend the user's identity) or refuse; the operation then uses the
 * value it returns. Namespaces are checked before and after the handler (422 for empty labels or
 * periods). A handler may also return filters (e.g. `{namespace: {$contains: identity}}`): as the
 * official server's `isAuthMatching`, they are matched against each item's value with its
 * namespace and key set in it. Searches and listings apply them in SQL (limit and offset count
 * the caller's items only); an item that does not pass is not found (get, put over it, delete),
 * and a put or delete that would not pass is refused (403). The graphs' own BaseStore calls
 * StoreService directly: it acts for the run.
 */
import { authorize, type Caller } from "./auth/caller.js";
import { assertNamespace, type StoreService } from "./store.js";
import type { StoreItemState } from "../domain/store.js";
import type { JsonObject } from "../domain/json.js";
import { filterMatches, type AuthFilters } from "../read-models/auth-filters.js";
import { AuthError } from "./auth/engine.js";
import { notFound } from "../domain/errors.js";

/** What the filters see of an item, as the official server builds it. */
const authDoc = (namespace: readonly string[], key: string | undefined, value: JsonObject | undefined): JsonObject => ({
  ...(value ?? {}),
  namespace: [...namespace],
  ...(key === undefined ? {} : { key }),
});

const passes = (filters: AuthFilters | undefined, namespace: readonly string[], key: string | undefined, value?: JsonObject) =>
  filterMatches(authDoc(namespace, key, value), filters);

const ITEM_NOT_FOUND = "Item not found";

export class StoreAccess {
  constructor(private readonly service: StoreService) {}

  async put(
    caller: Caller,
    item: { namespace: string[]; key: string; value: JsonObject; index?: false | string[] | null; ttl?: number | null },
  ): Promise<void> {
    assertNamespace(item.namespace);
    const { value, filters } = await authorize(caller, "store", "put", item);
    if (filters) {
      assertNamespace(value.namespace);
      const existing = await this.service.get(value.namespace, value.key, { refreshTtl: false });
      if (existing && !passes(filters, existing.namespace, existing.key, existing.value)) throw notFound(ITEM_NOT_FOUND);
      if (!passes(filters, value.namespace, value.key, value.value)) throw new AuthError(403, "Not authorized");
    }
    await this.service.put({ namespace: value.namespace, key: value.key, value: value.value, index: value.index, ttl: value.ttl });
  }

  async get(caller: Caller, namespace: string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<StoreItemState | undefined> {
    assertNamespace(namespace, { allowEmpty: true });
    const { value, filters } = await authorize(caller, "store", "get", { namespace, key });
    assertNamespace(value.namespace, { allowEmpty: true });
    if (!filters) return this.service.get(value.namespace, value.key, options);
    // Checked before a read refreshes the item's TTL: an item the caller may not see is left as it was.
    const item = await this.service.get(value.namespace, value.key, { refreshTtl: false });
    if (item && !passes(filters, item.namespace, item.key, item.value)) throw notFound(ITEM_NOT_FOUND);
    return item && options.refreshTtl !== false ? this.service.get(value.namespace, value.key, options) : item;
  }

  async delete(caller: Caller, namespace: string[], key: string): Promise<void> {
    assertNamespace(namespace, { allowEmpty: true });
    const { value, filters } = await authorize(caller, "store", "delete", { namespace, key });
    assertNamespace(value.namespace, { allowEmpty: true });
    if (filters) {
      const existing = await this.service.get(value.namespace, value.key, { refreshTtl: false });
      if (existing && !passes(filters, existing.namespace, existing.key, existing.value)) throw notFound(ITEM_NOT_FOUND);
      if (!existing && !passes(filters, value.namespace, value.key)) throw new AuthError(403, "Not authorized");
    }
    await this.service.delete(value.namespace, value.key);
  }

  async search(caller: Caller, q: { namespace: string[]; filter?: JsonObject; limit: number; offset: number; query?: string; refreshTtl?: boolean }) {
    assertNamespace(q.namespace, { allowEmpty: true });
    const { refreshTtl, ...asked } = q;
    const { value, filters } = await authorize(caller, "store", "search", asked);
    assertNamespace(value.namespace, { allowEmpty: true });
    return this.service.search({
      namespacePrefix: value.namespace,
      filter: value.filter,
      limit: value.limit,
      offset: value.offset,
      query: value.query,
      refreshTtl,
      authFilters: filters,
    });
  }

  async listNamespaces(caller: Caller, q: { namespace?: string[]; suffix?: string[]; max_depth?: number; limit: number; offset: number }): Promise<string[][]> {
    if (q.namespace) assertNamespace(q.namespace, { allowEmpty: true });
    if (q.suffix) assertNamespace(q.suffix, { allowEmpty: true });
    const { value, filters } = await authorize(caller, "store", "list_namespaces", q);
    if (value.namespace) assertNamespace(value.namespace, { allowEmpty: true });
    return this.service.listNamespaces({
      prefix: value.namespace,
      suffix: value.suffix,
      maxDepth: value.max_depth,
      limit: value.limit,
      offset: value.offset,
      authFilters: filters,
    });
  }
}
