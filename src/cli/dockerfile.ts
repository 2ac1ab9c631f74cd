/**
 * `agent-server dockerfile`: the Dockerfile that serves a user's LangGraph.js project (the
 * directory holding its `langgraph.json`) with this server, shaped like the ones the official
 * `langgraphjs dockerfile` / `langgraphjs build` write (libs/langgraph-cli/src/docker/docker.mts in
 * langchain-ai/langgraphjs):
 *
 *   FROM <node image of node_version>
 *   <dockerfile_lines, verbatim: the documented place is "right after the parent image">
 *   COPY . /deps/<project>            (the official images ADD the project there too)
 *   WORKDIR /deps/<project>
 *   RUN <install with the project's lockfile>
 *
 * The official image then starts its own API server (baked into its base image); this one
 * starts with the plain Node image and installs this package into the project instead, so the
 * server and the graphs share the project's @langchain/* modules (one copy of each class, as the
 * graphs' `instanceof` checks need).
 *
 * Pure: no I/O. Everything read from disk (the project directory's name, its lockfile) comes in
 * through the options, so the CLI decides and the tests need no files (and no Docker daemon).
 */
import { normalizeMountPrefix } from "../http/mount-prefix.js";

/** The lockfiles a project's install can be pinned by; `null`: none (plain `npm install`). */
export type Lockfile = "package-lock.json" | "npm-shrinkwrap.json" | "yarn.lock" | "pnpm-lock.yaml" | "bun.lock" | "bun.lockb";

/** The fields of `langgraph.json` the Dockerfile depends on (the parsed `LanggraphConfig` fits; so does raw JSON). */
export interface DockerfileConfig {
  node_version?: unknown;
  dependencies?: unknown;
  dockerfile_lines?: unknown;
  graphs?: unknown;
  http?: unknown;
}

export interface DockerfileOptions {
  /** Version (or dist-tag / range) of this package installed when the project does not depend on it. */
  packageVersion: string;
  /** This package's npm name (package.json "name"); default "agent-server". */
  packageName?: string;
  /**
   * The project directory's name: the project is copied to `/deps/<projectName>` (as the official
   * images do with the directory's basename). Default "app".
   */
  projectName?: string;
  /** The config file's path inside the project (default "langgraph.json"). */
  configFile?: string;
  /** The project's lockfile (see `detectLockfile`); default "package-lock.json"; null: none. */
  lockfile?: Lockfile | null;
}

/** Node majors below this cannot run the server (package.json "engines"). */
const MIN_NODE_MAJOR = 20;
const DEFAULT_NODE_VERSION = "20";
/** The port the official images listen on (`langgraph up` maps 8123:8000; deployments expect 8000). */
export const IMAGE_PORT = 8000;
const DATA_DIR = "/data";

/** Lockfiles in the order a project holding several is read (the official CLI's precedence: yarn, pnpm, npm, bun). */
const LOCKFILE_PRECEDENCE: readonly Lockfile[] = ["yarn.lock", "pnpm-lock.yaml", "package-lock.json", "npm-shrinkwrap.json", "bun.lock", "bun.lockb"];

/** The lockfile that decides the install, from the names of the files in the project directory; null when none. */
export function detectLockfile(fileNames: Iterable<string>): Lockfile | null {
  const present = new Set(fileNames);
  return LOCKFILE_PRECEDENCE.find((name) => present.has(name)) ?? null;
}

interface PackageManager {
  /** Lines that make the package manager available in a `node:*-slim` image (none for npm). */
  setup: string[];
  install: string;
  /** Adds packages to the installed project (specs shell-quoted by the caller). */
  add: (specs: string[]) => string;
}

// corepack is installed from npm rather than used as bundled: Node 25+ no longer bundles it, and
// `--force` replaces the yarn 1 the images ship, so the `packageManager` field of package.json
// (yarn berry, a pinned pnpm) is honoured.
const COREPACK = "RUN npm install -g --force --no-audit --no-fund corepack && corepack enable";

function packageManagerFor(lockfile: Lockfile | null): PackageManager {
  switch (lockfile) {
    case null:
      return { setup: [], install: "npm install --no-audit --no-fund", add: (s) => `npm install --no-save --no-audit --no-fund ${s.join(" ")}` };
    case "package-lock.json":
    case "npm-shrinkwrap.json":
      // npm ci: exactly the lockfile's tree, and it fails instead of drifting when package.json disagrees.
      // --no-save for the additions: the image's package.json stays the project's own.
      return { setup: [], install: "npm ci --no-audit --no-fund", add: (s) => `npm install --no-save --no-audit --no-fund ${s.join(" ")}` };
    case "yarn.lock":
      return {
        // Yarn berry's Plug'n'Play leaves no node_modules (the CMD runs node_modules/.bin): such projects set `nodeLinker: node-modules`.
        setup: [COREPACK],
        install: "yarn install --frozen-lockfile",
        add: (s) => `yarn add ${s.join(" ")}`,
      };
    case "pnpm-lock.yaml":
      return { setup: [COREPACK], install: "pnpm install --frozen-lockfile", add: (s) => `pnpm add ${s.join(" ")}` };
    case "bun.lock":
    case "bun.lockb":
      return { setup: ["RUN npm install -g --no-audit --no-fund bun"], install: "bun install --frozen-lockfile", add: (s) => `bun add ${s.join(" ")}` };
  }
}

/** npm's rule for package names (lowercase, optional scope, URL-safe). */
const NPM_NAME = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
/** A directory name safe inside `/deps/<name>` and a Dockerfile line (no spaces, quotes or slashes). */
const PATH_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/** Single-quoted for /bin/sh: a version range such as `>=0.1 <0.2` stays one word and is not a redirection. */
function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A CMD / HEALTHCHECK in exec form: Docker reads it as a JSON array, with ", " between items as written by hand. */
function execForm(args: string[]): string {
  return `[${args.map((a) => JSON.stringify(a)).join(", ")}]`;
}

function fail(field: string, message: string): never {
  throw new Error(`langgraph.json: ${field}: ${message}`);
}

function failOption(field: string, message: string): never {
  throw new Error(`dockerfileFor: options.${field}: ${message}`);
}

function nodeVersionOf(config: DockerfileConfig): string {
  const raw = config.node_version;
  if (raw === undefined || raw === null) return DEFAULT_NODE_VERSION;
  const text = typeof raw === "number" && Number.isInteger(raw) ? String(raw) : raw;
  // A major ("22") as the official CLI takes it; a full version ("22.11.0") names an exact image tag.
  if (typeof text !== "string" || !/^\d+(\.\d+){0,2}$/.test(text)) {
    fail("node_version", `expected a Node.js version such as "20" or "22", got ${JSON.stringify(raw)}`);
  }
  if (Number(text.split(".")[0]) < MIN_NODE_MAJOR) fail("node_version", `the server needs Node.js ${MIN_NODE_MAJOR} or later, got "${text}"`);
  return text;
}

function dockerfileLinesOf(config: DockerfileConfig): string[] {
  const raw = config.dockerfile_lines;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) fail("dockerfile_lines", "expected an array of strings (Dockerfile lines)");
  raw.forEach((line, i) => {
    if (typeof line !== "string") fail(`dockerfile_lines[${i}]`, `expected a string, got ${JSON.stringify(line)}`);
  });
  return raw as string[];
}

interface Dependencies {
  /** Local paths, as written, other than "." (inside the project, so inside its copy). */
  localPaths: string[];
  /** npm package specs to add to the project. */
  packages: string[];
}

/**
 * `dependencies`: "." is the project; "./x" a directory inside it (the build context is the
 * project directory, so it is in the copy already, and a path out of it could not be copied);
 * anything else an npm package spec added to the project, as the official Python images
 * pip-install their non-path dependencies.
 */
function dependenciesOf(config: DockerfileConfig): Dependencies {
  const raw = config.dependencies;
  const result: Dependencies = { localPaths: [], packages: [] };
  if (raw === undefined || raw === null) return result;
  if (!Array.isArray(raw)) fail("dependencies", 'expected an array of strings (".", "./path" or npm package specs)');
  raw.forEach((dep, i) => {
    const field = `dependencies[${i}]`;
    if (typeof dep !== "string" || dep.trim() === "") fail(field, `expected a non-empty string, got ${JSON.stringify(dep)}`);
    if (/[\n\r]/.test(dep)) fail(field, "expected one line");
    if (dep.startsWith(".") || dep.startsWith("/") || /^[A-Za-z]:[\\/]/.test(dep)) {
      const segments = dep.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
      if (dep.startsWith("/") || /^[A-Za-z]:/.test(dep) || segments.includes("..")) {
        fail(field, `"${dep}" is outside the project directory (the Docker build context); move it inside or publish it as a package`);
      }
      if (segments.length > 0 && !result.localPaths.includes(dep)) result.localPaths.push(dep);
      return;
    }
    if (/\s/.test(dep)) fail(field, `expected a path or an npm package spec, got ${JSON.stringify(dep)}`);
    result.packages.push(dep);
  });
  return result;
}

function mountPrefixOf(config: DockerfileConfig): string {
  const http = config.http;
  if (typeof http !== "object" || http === null) return "";
  const prefix = (http as { mount_prefix?: unknown }).mount_prefix;
  return typeof prefix === "string" ? normalizeMountPrefix(prefix) : "";
}

/** The Dockerfile (text, ending in a newline) serving the project `config` was read from; throws an Error naming a bad field. */
export function dockerfileFor(config: DockerfileConfig, options: DockerfileOptions): string {
  if (typeof config !== "object" || config === null || Array.isArray(config)) throw new Error("langgraph.json: expected a JSON object");
  const packageName = options.packageName ?? "agent-server";
  if (!NPM_NAME.test(packageName)) failOption("packageName", `not an npm package name: ${JSON.stringify(packageName)}`);
  const packageVersion = options.packageVersion;
  if (typeof packageVersion !== "string" || packageVersion.trim() === "" || /[\n\r'"]/.test(packageVersion)) {
    failOption("packageVersion", `expected a version, dist-tag or range, got ${JSON.stringify(packageVersion)}`);
  }
  const projectName = options.projectName ?? "app";
  if (!PATH_SEGMENT.test(projectName)) failOption("projectName", `expected a directory name (letters, digits, . _ -), got ${JSON.stringify(projectName)}`);
  const configFile = (options.configFile ?? "langgraph.json").replace(/^\.\//, "");
  if (configFile === "" || configFile.startsWith("/") || configFile.split("/").includes("..") || !/^[A-Za-z0-9._/-]+$/.test(configFile)) {
    failOption("configFile", `expected a path inside the project, got ${JSON.stringify(options.configFile)}`);
  }
  const lockfile = options.lockfile === undefined ? "package-lock.json" : options.lockfile;
  if (lockfile !== null && !LOCKFILE_PRECEDENCE.includes(lockfile)) failOption("lockfile", `unknown lockfile ${JSON.stringify(lockfile)}`);

  const nodeVersion = nodeVersionOf(config);
  const extraLines = dockerfileLinesOf(config);
  const deps = dependenciesOf(config);
  const pm = packageManagerFor(lockfile);
  const workdir = `/deps/${projectName}`;
  const bin = `${workdir}/node_modules/.bin/agent-server`;
  // PORT read when the check runs: `docker run -e PORT=...` moves the server, and the check follows.
  const healthPath = `${mountPrefixOf(config)}/ok`;

  const lines: string[] = [
    `# Generated by \`agent-server dockerfile\` (${packageName}@${packageVersion}) from ${configFile}: regenerate rather than edit;`,
    "# add build steps through dockerfile_lines in langgraph.json. Build from the project directory:",
    "#   docker build -t my-agent .",
    "#   docker run -p 8000:8000 -v my-agent-data:/data -e EVENTSTORE_URL=esdb://... my-agent",
    // bookworm (glibc): the prebuilt better-sqlite3 binaries fit, and it is the Debian the toolchain below comes from.
    `FROM node:${nodeVersion}-bookworm-slim`,
    ...extraLines,
    // better-sqlite3 (the server's read models) compiles from source when no prebuilt binary fits the
    // platform or the Node ABI; the project's own native modules may need the same.
    "RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*",
    ...pm.setup,
  ];
  lines.push(
    // The whole project, as the official images copy it: graph paths in langgraph.json are relative
    // to it, and workspaces need their package.json files before the install. A .dockerignore with
    // node_modules keeps the host's (other platform's) modules out.
    `COPY . ${workdir}`,
  );
  if (deps.localPaths.length > 0) lines.push(`# Local dependencies inside the project, so in this copy: ${deps.localPaths.join(" ")}`);
  lines.push(`WORKDIR ${workdir}`, `RUN ${pm.install}`);
  // The server joins the project's node_modules (one copy of @langchain/*) unless the project already
  // depends on it, in which case its own version (and lockfile) wins.
  const serverSpec = shellQuote(`${packageName}@${packageVersion}`);
  lines.push(`RUN if [ -e node_modules/${packageName}/package.json ]; then echo "${packageName}: the project's own version"; else ${pm.add([serverSpec])}; fi`);
  if (deps.packages.length > 0) lines.push(`RUN ${pm.add(deps.packages.map(shellQuote))}`);
  lines.push(
    // 8000 as in the official images, so compose files and deployments written for them fit; 2024
    // stays the default outside Docker (the port `langgraph dev` uses). HOST: reachable from outside the container.
    `ENV HOST=0.0.0.0 PORT=${IMAGE_PORT} DATA_DIR=${DATA_DIR}`,
    // The read models (SQLite) and, without EVENTSTORE_URL, the log itself: a volume, so they outlive the container.
    `VOLUME ${DATA_DIR}`,
    `EXPOSE ${IMAGE_PORT}`,
    // /ok is public (no API key) and answers 503 while the server cannot serve writes. node, not curl: the slim image has no curl.
    `HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ${execForm(["node", "-e", `fetch("http://127.0.0.1:" + (process.env.PORT || ${IMAGE_PORT}) + ${JSON.stringify(healthPath)}).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`])}`,
    // The bin itself, not `npx agent-server`: it is PID 1 and gets SIGTERM directly (npx would stand in
    // between), and nothing is ever downloaded at start.
    `CMD ${execForm([bin, "start", "--config", `${workdir}/${configFile}`])}`,
  );
  return `${lines.join("\n")}\n`;
}

/**
 * A .dockerignore for the project beside the Dockerfile: the host's node_modules (maybe another
 * platform's native binaries; the image installs its own) and .git stay out. Nothing else: a
 * project's `data/` or `.env` may be what its graphs (or langgraph.json's `env`) read.
 */
export const PROJECT_DOCKERIGNORE = ["node_modules", "**/node_modules", ".git", ""].join("\n");
