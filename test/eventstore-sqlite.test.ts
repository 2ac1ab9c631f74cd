import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { openSqliteStore } from "../src/eventstore/sqlite.js";
import { eventStoreContract } from "./contract/eventstore-contract.js";

async function tempDir(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), "eventstore-sqlite-"));
}

t.test("contract", async (t) => {
  eventStoreContract(t, async () => {
    const dir = await tempDir();
    const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
    return {
      store,
      async cleanup() {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  });
});
