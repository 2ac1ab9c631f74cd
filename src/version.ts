import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The package version, read once from package.json. */
export const VERSION: string = (require("../package.json") as { version: string }).version;

/** The installed @langchain/langgraph version, reported by /info. */
export const LANGGRAPH_JS_VERSION: string = (() => {
  try {
    return (require("@langchain/langgraph/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
})();
