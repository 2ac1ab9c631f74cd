import { evolveStoreItem, STORE_STREAM_PREFIX, type StoreEvent, type StoreItemState } from "../src/domain/store.js";
import { aggregateProjection } from "./projection.js";

/** Store items by stream (one stream per item); a deleted or expired item leaves the read model. */
export const storeItemsProjection = aggregateProjection<StoreItemState | undefined, StoreEvent>("store_items", STORE_STREAM_PREFIX, evolveStoreItem);
