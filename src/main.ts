import { loadConfig } from "./config.js";
import { serve } from "./cli/serve.js";

/** Entry point (`npm start`): configured by environment variables only; `agent-server` (src/cli.ts) adds flags. */
serve(loadConfig()).catch((error: unknown) => {
  console.error(`agent-server: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
