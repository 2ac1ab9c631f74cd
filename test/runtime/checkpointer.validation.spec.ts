import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { checkpointEventSchemas } from "../../src/domain/checkpoint-events.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";

/** What each saver under test holds, so that destroyCheckpointer can release it. */
const resources = new WeakMap<EventSourcedCheckpointSaver, { store: EventStore; dir: string }>();

const initializerWith = (
  name: string,
  options: { cacheThreads: number; snapshotEvery?: number },
): CheckpointSaverTestInitializer<EventSourcedCheckpointSaver> => ({
  checkpointerName: name,
  async createCheckpointer() {
    const dir = mkdtempSync(path.join(tmpdir(), "checkpointer-validation-"));
    const store = withSchemas(await openSqliteStore({ path: path.join(dir, "events.sqlite") }), (type) =>
      Object.hasOwn(checkpointEventSchemas, type) ? checkpointEventSchemas[type] : undefined,
    );
    const saver = new EventSourcedCheckpointSaver({ store, ...options });
    resources.set(saver, { store, dir });
    return saver;
  },
  async destroyCheckpointer(saver) {
    const held = resources.get(saver);
    if (!held) return;
    resources.delete(saver);
    await held.store.close();
    rmSync(held.dir, { recursive: true, force: true });
  },
});

// A cache of two threads: the suite's threads are evicted and reloaded from the log all along.
const initializer = initializerWith("event-sourced-saver", { cacheThreads: 2 });
// A snapshot after every checkpoint and a cache of one thread: reads are served from states
// folded from a snapshot (partial), and fall back to the whole stream where those cannot answer.
const snapshotting = initializerWith("event-sourced-saver (snapshot every checkpoint)", { cacheThreads: 1, snapshotEvery: 1 });

// The standard suite (~718 tests), then the opt-in beta suite for getDeltaChannelHistory, which
// exercises the base class's walk over our getTuple (parent chain, pending-write order, seeds).
validate(initializer);
deltaChannelHistoryTests(initializer);
validate(snapshotting);
deltaChannelHistoryTests(snapshotting);
