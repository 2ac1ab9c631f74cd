/**
 * Loads the `auth.path` handler named in langgraph.json. Anything short of a usable `Auth`
 * instance stops the server at start with one line naming the file and the export: a server
 * whose owner asked for authentication must never come up open.
 */
import path from "node:path";
import { importFile } from "../runtime/graphs.js";
import { authHandlersOf, type AuthHandlers } from "./handlers.js";

export class AuthLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuthLoadError";
  }
}

/** `./auth.ts:auth` → file and export (`default` when no export is named, as the official server). */
export function splitAuthPath(spec: string): { file: string; exportName: string } {
  const idx = spec.lastIndexOf(":");
  // A colon that belongs to a Windows drive letter ("C:\...") is not an export separator.
  if (idx <= 1 || /[\\/]/.test(spec.slice(idx + 1))) return { file: spec.trim(), exportName: "default" };
  return { file: spec.slice(0, idx).trim(), exportName: spec.slice(idx + 1).trim() || "default" };
}

/** The handlers of the configured `Auth`, or undefined when langgraph.json names no `auth.path`. */
export async function loadAuth(auth: { path?: string } | undefined, baseDir: string, label = "langgraph.json"): Promise<AuthHandlers | undefined> {
  if (!auth?.path) return undefined;
  const { file, exportName } = splitAuthPath(auth.path);
  const where = `${label}: auth.path "${auth.path}"`;
  let mod: Record<string, unknown>;
  try {
    mod = await importFile(path.resolve(baseDir, file));
  } catch (err) {
    throw new AuthLoadError(`${where}: cannot load ${file}: ${String((err as Error)?.message ?? err).split("\n")[0]}`);
  }
  if (!(exportName in mod) || mod[exportName] === undefined) {
    throw new AuthLoadError(`${where}: ${file} has no export "${exportName}"`);
  }
  const handlers = authHandlersOf(mod[exportName]);
  if (!handlers) {
    throw new AuthLoadError(`${where}: export "${exportName}" of ${file} is not an Auth instance (new Auth() from @langchain/langgraph-sdk/auth)`);
  }
  if (!handlers.authenticate) {
    throw new AuthLoadError(`${where}: the Auth exported as "${exportName}" from ${file} has no authenticate() handler`);
  }
  return { authenticate: handlers.authenticate, callbacks: handlers.callbacks };
}
