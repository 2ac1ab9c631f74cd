import path from "node:path";
import type { Config } from "../config.js";
import { loadLanggraphConfig, parseLanggraphConfigEnv, type LoadedLanggraphConfig } from "../langgraph-config.js";
import { TypeSchemaReader } from "../runtime/type-schemas/reader.js";
import { GraphCatalogue } from "../runtime/graph-catalogue.js";
import { loadStoreIndex, type StoreIndex } from "../runtime/store-index.js";
import { bundleUi, type UiBundles } from "../runtime/ui-bundles.js";
import { loadAuth } from "../app/auth/load.js";
import type { AuthHandlers } from "../app/auth/handlers.js";
import { loadCustomApp, type FetchApp } from "../http/custom-app.js";

/** langgraph.json and the user modules it names. */
export interface Configuration {
  langgraph: LoadedLanggraphConfig;
  /** Its passes are ended before HTTP's close (see startHttp), which waits for the requests awaiting them. */
  typeSchemas: TypeSchemaReader;
  graphs: GraphCatalogue;
  auth: AuthHandlers | undefined;
  storeIndex: StoreIndex | undefined;
  customApp: FetchApp | undefined;
  uiBundles: UiBundles | undefined;
}

/** Loaded first, and nothing to close: a bad langgraph.json or a module it names fails before anything is opened. */
export async function loadConfiguration(config: Config): Promise<Configuration> {
  const langgraph = await loadLanggraphConfig(config.langgraphJsonPath);
  // Schemas from the graph files' types: read in a worker thread when first asked, cached in DATA_DIR.
  const typeSchemas = new TypeSchemaReader({
    cacheDir: path.join(config.dataDir, "type-schemas"),
    timeoutMs: config.schemaResolveTimeoutMs,
    log: (m) => console.error(m),
  });
  // The graphs as langgraph.json names them; their files (and LangGraph) are loaded after the server listens.
  // LANGGRAPH_CONFIG may come from langgraph.json's `env` too (the environment wins, as for every variable).
  const graphs = new GraphCatalogue(
    langgraph.config.graphs,
    langgraph.baseDir,
    parseLanggraphConfigEnv(config.langgraphConfig ?? langgraph.env.LANGGRAPH_CONFIG),
  );
  // A configured auth that cannot be loaded stops the start: never serve open by accident.
  const auth = await loadAuth(langgraph.config.auth, langgraph.baseDir, path.basename(langgraph.configPath));
  const storeIndex = await loadStoreIndex(langgraph.config.store?.index, langgraph.baseDir, path.basename(langgraph.configPath));
  const httpConfig = langgraph.config.http;
  const customApp = httpConfig.app ? await loadCustomApp(httpConfig.app, langgraph.baseDir) : undefined;
  // Generative UI components, bundled before HTTP listens (a file that cannot be bundled stops the start).
  const uiBundles =
    langgraph.config.ui && !httpConfig.disable_ui
      ? await bundleUi(langgraph.config.ui, { cwd: langgraph.baseDir, shared: langgraph.config.ui_config?.shared })
      : undefined;
  return { langgraph, typeSchemas, graphs, auth, storeIndex, customApp, uiBundles };
}
