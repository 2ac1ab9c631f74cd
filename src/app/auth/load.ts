/**
 * Loads the `auth.path` handler named in langgraph.json. Anything short of a usable `Auth`
 * instance stops the server at start with one line naming the file and the export: a server
 * whose owner asked for authentication must never come up open.
 */
import { loadExport, parseModuleSpec } from "../../module-loader.js";
import { authHandlersOf, type AuthHandlers } from "./handlers.js";

export class AuthLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuthLoadError";
  }
}

/** The handlers of the configured `Auth`, or undefined when langgraph.json names no `auth.path`. */
export async function loadAuth(auth: { path?: string } | undefined, baseDir: string, label = "langgraph.json"): Promise<AuthHandlers | undefined> {
  if (!auth?.path) return undefined;
  // As the official server: the default export when the spec names none.
  const { file, exportName = "default" } = parseModuleSpec(auth.path);
  const where = `${label}: auth.path "${auth.path}"`;
  const handlers = authHandlersOf((await loadExport({ file, exportName }, baseDir, where, (m) => new AuthLoadError(m))).value);
  if (!handlers) {
    throw new AuthLoadError(`${where}: export "${exportName}" of ${file} is not an Auth instance (new Auth() from @langchain/langgraph-sdk/auth)`);
  }
  if (!handlers.authenticate) {
    throw new AuthLoadError(`${where}: the Auth exported as "${exportName}" from ${file} has no authenticate() handler`);
  }
  return { authenticate: handlers.authenticate, callbacks: handlers.callbacks };
}
