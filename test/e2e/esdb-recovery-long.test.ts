import t from "tap";
import { outage } from "../support/esdb-outage.js";

/** A 30 s outage between a server process and EventStoreDB: the same promises as for a 3 s one (test/e2e/esdb-recovery.test.ts). */

t.setTimeout(180_000);

t.test("a 30 s cut: /ok says so, requests get 503 + Retry-After, and the server serves again within 5 s of the heal", async (t) => {
  await outage(t, 30_000);
});
