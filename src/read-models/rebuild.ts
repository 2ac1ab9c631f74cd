import { rmSync } from "node:fs";
import path from "node:path";
import { loadConfig } from "../config.js";
import { openStore } from "../eventstore/open.js";
import { openEncryption } from "../eventstore/encryption.js";
import { contentPolicy } from "../domain/content-fields.js";
import { openReadModels, READ_MODELS_FILE, readModelsKeyOf } from "./all.js";

/**
 * `npm run rebuild`: deletes DATA_DIR/read-models.sqlite and folds the whole log into a new one,
 * printing how fast. With the embedded store the server must be stopped (it holds the log's lock).
 * The quarantine is rebuilt with it: once the code that threw on an event is fixed, its event is
 * folded like any other; what still fails is quarantined again and counted in the output.
 * With LANGGRAPH_AES_KEY the log is read through its key vault, as the server reads it: the read
 * models fold plaintext, and a key that opens no key of the vault stops the rebuild before anything
 * is deleted.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const encryption = await openEncryption(config.encryption, contentPolicy);
  let store;
  try {
    const log = await openStore(config);
    store = encryption ? encryption.wrap(log) : log;
  } catch (error) {
    encryption?.close();
    throw error;
  }
  try {
    const file = path.join(config.dataDir, READ_MODELS_FILE);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const models = openReadModels(config.dataDir, { key: encryption ? readModelsKeyOf(encryption.masterKeys) : undefined });
    let events = 0;
    models.runner.onApplied(() => events++);
    const started = process.hrtime.bigint();
    const cpuBefore = process.cpuUsage();
    await models.runner.start(store);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const cpu = process.cpuUsage(cpuBefore);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const position = models.runner.position;
    // What still cannot be folded after the rebuild (GET /audit/quarantine lists it once the server runs).
    const quarantined = models.runner.quarantine.summary();
    await models.runner.close();
    console.log(
      JSON.stringify({
        rebuild: {
          file,
          events,
          seconds: Number(seconds.toFixed(3)),
          events_per_s: Math.round(events / Math.max(seconds, 1e-9)),
          cpu_seconds: Number(cpuSeconds.toFixed(3)),
          events_per_cpu_s: Math.round(events / Math.max(cpuSeconds, 1e-9)),
          position: String(position),
          quarantined,
        },
      }),
    );
  } finally {
    await store.close();
    encryption?.close();
  }
}

main().catch((error: unknown) => {
  console.error(`rebuild: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
