/**
 * `agent-server`: the command a LangGraph.js project runs after `npm install agent-server`.
 *
 *   agent-server dev      development server (LANGGRAPH_DEV=true, graphs reloaded on change), graphs of ./langgraph.json
 *   agent-server start    the same server in production mode
 *   agent-server replay   a thread as it was at a point of the log (src/app/replay-cli.ts)
 *   agent-server rebuild  the read models folded again from the log (src/read-models/rebuild.ts)
 *   agent-server dockerfile  a Dockerfile serving the project (src/cli/dockerfile.ts)
 *   agent-server keys rotate  the key vault's data keys wrapped again with the new master key (src/cli/keys.ts)
 *
 * Flags override environment variables, which keep their meaning (src/config.ts). The project is
 * the folder of the langgraph.json (the current folder unless --config says otherwise): the
 * server never falls back to a langgraph.json of its own.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { VERSION } from "./version.js";

const NAME = "agent-server";
/** Data directory when neither --data-dir nor DATA_DIR says: hidden, so a project's own `data/` is never touched. */
const DEFAULT_DATA_DIR = ".agent-server";

class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig["options"]>;

const COMMON: Options = {
  help: { type: "boolean", short: "h" },
  config: { type: "string", short: "c" },
  "data-dir": { type: "string" },
};
const SERVER: Options = {
  ...COMMON,
  host: { type: "string" },
  port: { type: "string", short: "p" },
  "n-jobs-per-worker": { type: "string" },
  // langgraph-cli's flag; this server never opens a browser.
  "no-browser": { type: "boolean" },
};
const COMMANDS: Record<string, { options: Options; summary: string }> = {
  dev: { options: SERVER, summary: "Development server (LANGGRAPH_DEV=true): reloads graphs on change, POST /internal/truncate, webhooks to local addresses" },
  start: { options: SERVER, summary: "Production server" },
  replay: {
    options: {
      ...COMMON,
      host: SERVER.host!,
      port: SERVER.port!,
      thread: { type: "string" },
      at: { type: "string" },
      diff: { type: "string" },
      incarnation: { type: "string" },
    },
    summary: "A thread as it was at a point of the log, as JSON: --thread <id> [--at <pos|time>] [--diff <pos|time>] [--incarnation <n>]",
  },
  rebuild: { options: COMMON, summary: "Fold the log into new read models (stop the server first when the store is SQLite)" },
  keys: {
    options: COMMON,
    summary: "keys rotate: re-wrap the key vault's data keys with LANGGRAPH_AES_KEY (old keys in LANGGRAPH_AES_PREVIOUS_KEYS)",
  },
  dockerfile: {
    options: { help: COMMON.help!, config: COMMON.config!, output: { type: "string", short: "o" } },
    summary: "Write a Dockerfile serving this project: [-o, --output <file>] (default ./Dockerfile; - = stdout)",
  },
};

const HELP = `Usage: ${NAME} <command> [options]

Serves the LangGraph.js graphs named by langgraph.json in the current folder
(or --config) with this project's own @langchain/langgraph.

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(9)}${c.summary}`)
  .join("\n")}

Options:
  -c, --config <path>          langgraph.json to serve (default ./langgraph.json; env LANGGRAPH_JSON)
      --host <address>         address to listen on (default 127.0.0.1; env HOST)
  -p, --port <port>            port to listen on, 0 = any free one (default 2024; env PORT)
      --data-dir <dir>         SQLite log and read models (default ./${DEFAULT_DATA_DIR}; env DATA_DIR)
      --n-jobs-per-worker <n>  runs executed at once (default 10; env N_JOBS_PER_WORKER)
      --no-browser             accepted as langgraph-cli accepts it (no browser is opened)
  -h, --help                   this help
  -v, --version                the version

Environment: EVENTSTORE_URL (EventStoreDB instead of SQLite), LANGGRAPH_API_KEY,
and the variables of langgraph.json's "env" (an object or a .env file path).
`;

interface PackageJson {
  name: string;
  version: string;
  peerDependencies?: Record<string, string>;
}

function ownPackage(): PackageJson {
  return createRequire(import.meta.url)("../package.json") as PackageJson;
}

/** The langgraph.json to serve: --config, else LANGGRAPH_JSON, else ./langgraph.json; a directory means its langgraph.json. */
function configPath(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  let file = path.resolve(flag ?? (env.LANGGRAPH_JSON || "langgraph.json"));
  if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, "langgraph.json");
  return file;
}

function setIf(env: NodeJS.ProcessEnv, name: string, value: string | boolean | undefined): void {
  if (typeof value === "string") env[name] = value;
}

async function runServer(command: "dev" | "start", values: Record<string, string | boolean | undefined>): Promise<void> {
  const env = process.env;
  const file = configPath(values.config as string | undefined, env);
  if (!existsSync(file)) {
    throw new Error(`no langgraph.json at ${file}: run ${NAME} in your project's folder, or pass --config <path to langgraph.json>`);
  }
  const pkg = ownPackage();
  const { checkPeers } = await import("./cli/peers.js");
  const problem = checkPeers(path.dirname(file), pkg.peerDependencies ?? {}, `${NAME} ${pkg.version}`);
  if (problem) throw new Error(problem);
  // The project's `env` first (it does not override variables already set), then the flags over both.
  const { loadLanggraphConfig } = await import("./langgraph-config.js");
  const langgraph = await loadLanggraphConfig(file);
  env.LANGGRAPH_JSON = file;
  setIf(env, "HOST", values.host);
  setIf(env, "PORT", values.port);
  setIf(env, "N_JOBS_PER_WORKER", values["n-jobs-per-worker"]);
  setIf(env, "DATA_DIR", values["data-dir"]);
  if (!env.DATA_DIR) env.DATA_DIR = DEFAULT_DATA_DIR;
  env.LANGGRAPH_DEV = command === "dev" ? "true" : "false";
  // dev reloads the graphs on change unless told not to; start serves the code it started with.
  env.LANGGRAPH_WATCH = command === "dev" ? env.LANGGRAPH_WATCH || "true" : "false";
  const { loadConfig } = await import("./config.js");
  const config = loadConfig(env);
  const { serve } = await import("./cli/serve.js");
  await serve(config, { langgraph, studioHint: command === "dev" });
}

/**
 * The environment of an offline tool (replay, rebuild, keys): the project's langgraph.json `env` (which
 * may say where the log and the key vault are, and hold the keys, as for the server; without a
 * langgraph.json the environment alone does), and the data directory of `--data-dir` or the default.
 */
async function offlineEnvironment(values: Record<string, string | boolean | undefined>): Promise<NodeJS.ProcessEnv> {
  const env = process.env;
  const file = configPath(values.config as string | undefined, env);
  if (existsSync(file)) {
    const { loadLanggraphConfig } = await import("./langgraph-config.js");
    await loadLanggraphConfig(file);
  } else if (values.config !== undefined) {
    throw new Error(`no langgraph.json at ${file}`);
  }
  setIf(env, "DATA_DIR", values["data-dir"]);
  if (!env.DATA_DIR) env.DATA_DIR = DEFAULT_DATA_DIR;
  return env;
}

/**
 * replay and rebuild are the repository's own scripts, which read process.argv and exit by
 * themselves: they are given their own arguments and the environment the flags describe.
 */
async function runTool(command: "replay" | "rebuild", values: Record<string, string | boolean | undefined>): Promise<void> {
  const env = await offlineEnvironment(values);
  setIf(env, "HOST", values.host);
  setIf(env, "PORT", values.port);
  const forwarded: string[] = [];
  for (const name of ["thread", "at", "diff", "incarnation"]) {
    const value = values[name];
    if (typeof value === "string") forwarded.push(`--${name}`, value);
  }
  process.argv = [process.argv[0]!, process.argv[1]!, ...forwarded];
  if (command === "replay") await import("./app/replay-cli.js");
  else await import("./read-models/rebuild.js");
}

/** `keys <action>`: offline operations on the key vault of encryption at rest. */
async function runKeys(positionals: string[], values: Record<string, string | boolean | undefined>): Promise<void> {
  const [action, ...extra] = positionals;
  if (action !== "rotate" || extra.length > 0) throw new UsageError(`keys: expected \`${NAME} keys rotate\`, got ${JSON.stringify(positionals.join(" "))}`);
  const env = await offlineEnvironment(values);
  const [{ loadConfig }, { rotateKeys }] = await Promise.all([import("./config.js"), import("./cli/keys.js")]);
  for (const line of await rotateKeys(loadConfig(env))) console.log(`${NAME}: ${line}`);
}

/** The mark dockerfileFor's output starts with: a Dockerfile holding it may be overwritten, another one is the user's. */
const GENERATED_MARK = "# Generated by `agent-server dockerfile`";

async function writeDockerfile(values: Record<string, string | boolean | undefined>): Promise<void> {
  const file = configPath(values.config as string | undefined, process.env);
  if (!existsSync(file)) throw new Error(`no langgraph.json at ${file}: run ${NAME} in your project's folder, or pass --config <path to langgraph.json>`);
  const projectDir = path.dirname(file);
  const [{ loadLanggraphConfig }, { dockerfileFor, detectLockfile, PROJECT_DOCKERIGNORE }] = await Promise.all([
    import("./langgraph-config.js"),
    import("./cli/dockerfile.js"),
  ]);
  const { config } = await loadLanggraphConfig(file, { applyEnv: false });
  const pkg = ownPackage();
  const base = path.basename(projectDir);
  const text = dockerfileFor(config, {
    packageVersion: pkg.version,
    packageName: pkg.name,
    projectName: /^[A-Za-z0-9._-]+$/.test(base) && !/^\.+$/.test(base) ? base : "app",
    configFile: path.basename(file),
    lockfile: detectLockfile(readdirSync(projectDir)),
  });
  const output = typeof values.output === "string" ? values.output : "Dockerfile";
  if (output === "-") {
    process.stdout.write(text);
    return;
  }
  const target = path.resolve(output);
  if (values.output === undefined && existsSync(target) && !readFileSync(target, "utf8").startsWith(GENERATED_MARK)) {
    throw new Error(`${target} exists and was not written by ${NAME}: pass --output <file> (or --output ${target} to replace it)`);
  }
  writeFileSync(target, text);
  console.log(`${NAME}: wrote ${target}`);
  // The host's node_modules must stay out of the build context (the image installs its own).
  const ignore = path.join(path.dirname(target), ".dockerignore");
  if (!existsSync(ignore)) {
    writeFileSync(ignore, PROJECT_DOCKERIGNORE);
    console.log(`${NAME}: wrote ${ignore}`);
  }
}

async function main(argv: string[]): Promise<void> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "-h" || first === "--help" || first === "help") {
    process.stdout.write(HELP);
    return;
  }
  if (first === "-v" || first === "--version") {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const command = COMMANDS[first];
  if (!command) throw new UsageError(first.startsWith("-") ? `expected a command before ${first}` : `unknown command ${JSON.stringify(first)}`);
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    // No option is `multiple`: every value is a string or a boolean. Only `keys` takes an action after it.
    const parsed = parseArgs({ args: rest, options: command.options, strict: true, allowPositionals: first === "keys" });
    values = parsed.values as Record<string, string | boolean | undefined>;
    positionals = parsed.positionals;
  } catch (error) {
    throw new UsageError((error as Error).message.split("\n")[0]);
  }
  const port = values.port;
  if (typeof port === "string" && (!/^\d{1,5}$/.test(port) || Number(port) > 65535)) {
    throw new UsageError(`--port: expected a port number (0-65535, 0 = any free port), got ${JSON.stringify(port)}`);
  }
  if (values.help) {
    process.stdout.write(`${NAME} ${first}: ${command.summary}\n\n${HELP}`);
    return;
  }
  if (first === "dev" || first === "start") await runServer(first, values);
  else if (first === "dockerfile") await writeDockerfile(values);
  else if (first === "keys") await runKeys(positionals, values);
  else await runTool(first as "replay" | "rebuild", values);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const usage = error instanceof UsageError;
  console.error(`${NAME}: ${error instanceof Error ? error.message : String(error)}${usage ? ` (${NAME} --help lists the commands and options)` : ""}`);
  process.exit(usage ? 2 : 1);
});
