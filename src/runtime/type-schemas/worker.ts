/**
 * Worker thread of the TypeScript schema pass (reader.ts starts it for one batch and ends it):
 * receives the targets, answers their schemas. The compiler's seconds of CPU stay off the
 * server's event loop.
 */
import { parentPort } from "node:worker_threads";
import { extractTypeSchemas, type TypeSchemaTarget } from "./extract.js";

const port = parentPort;
if (!port) throw new Error("type-schemas/worker.ts runs as a worker thread");
port.once("message", (targets: TypeSchemaTarget[]) => {
  try {
    port.postMessage({ results: extractTypeSchemas(targets) });
  } catch (error) {
    port.postMessage({ error: (error as Error).message });
  }
});
