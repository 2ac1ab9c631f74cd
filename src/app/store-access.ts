/**
 * The Store as the edges reach it, on behalf of a caller: each operation runs custom auth's
 * `store:<action>` handler first. As in the official servers, a store handler may rewrite
 * `value.namespace` (e.g. prepend the user's identity) or refuse; the operation then uses the
 * value it returns. Namespaces are checked before and after the handler (422 for empty labels or
 * periods). The graphs' own BaseStore calls StoreService directly: it acts for the run.
 */
import { authorize, type Caller } from "./auth/caller.js";
import { assertNamespace, type StoreService } from "./store.js";
import type { StoreItemState } from "../domain/store.js";
import type { JsonObject } from "../domain/json.js";

export class StoreAccess {
  constructor(private readonly service: StoreService) {}

  async put(caller: Caller, item: { namespace: string[]; key: string; value: JsonObject; index?: false | string[] | null; ttl?: number | null }): Promise<void> {
    assertNamespace(item.namespace);
    const { value } = await authorize(caller, "store", "put", item);
    await this.service.put({ namespace: value.namespace, key: value.key, value: value.value, index: value.index, ttl: value.ttl });
  }

  async get(caller: Caller, namespace: string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<StoreItemState | undefined> {
    assertNamespace(namespace, { allowEmpty: true });
    const { value } = await authorize(caller, "store", "get", { namespace, key });
    assertNamespace(value.namespace, { allowEmpty: true });
    return this.service.get(value.namespace, value.key, options);
  }

  async delete(caller: Caller, namespace: string[], key: string): Promise<void> {
    assertNamespace(namespace, { allowEmpty: true });
    const { value } = await authorize(caller, "store", "delete", { namespace, key });
    assertNamespace(value.namespace, { allowEmpty: true });
    await this.service.delete(value.namespace, value.key);
  }

  async search(caller: Caller, q: { namespace: string[]; filter?: JsonObject; limit: number; offset: number; query?: string; refreshTtl?: boolean }) {
    assertNamespace(q.namespace, { allowEmpty: true });
    const { refreshTtl, ...asked } = q;
    const { value } = await authorize(caller, "store", "search", asked);
    assertNamespace(value.namespace, { allowEmpty: true });
    return this.service.search({ namespacePrefix: value.namespace, filter: value.filter, limit: value.limit, offset: value.offset, query: value.query, refreshTtl });
  }

  async listNamespaces(caller: Caller, q: { namespace?: string[]; suffix?: string[]; max_depth?: number; limit: number; offset: number }): Promise<string[][]> {
    if (q.namespace) assertNamespace(q.namespace, { allowEmpty: true });
    if (q.suffix) assertNamespace(q.suffix, { allowEmpty: true });
    const { value } = await authorize(caller, "store", "list_namespaces", q);
    if (value.namespace) assertNamespace(value.namespace, { allowEmpty: true });
    return this.service.listNamespaces({ prefix: value.namespace, suffix: value.suffix, maxDepth: value.max_depth, limit: value.limit, offset: value.offset });
  }
}
