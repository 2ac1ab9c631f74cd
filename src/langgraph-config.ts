/**
 * `langgraph.json` (zod schema + loader) and the `LANGGRAPH_CONFIG` environment variable.
 *
 * Fields read: `graphs`, `env`, `http`, `webhooks`, `auth`, `store`, `checkpointer`, `ui`, `ui_config`;
 * every other top-level key (node_version, dependencies, ...) is accepted and passed through.
 * An invalid file is reported as one line naming the field, e.g.
 *   `langgraph.json: graphs.agent: expected "path:export"`.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseEnv } from "node:util";
import * as z from "zod";
import { isPlainObject, type JsonObject } from "./util/json.js";
import { parseModuleSpec } from "./module-loader.js";

/** An invalid `langgraph.json` or `LANGGRAPH_CONFIG`; the message is one line naming the field. */
export class LanggraphConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LanggraphConfigError";
  }
}

// ---------------------------------------------------------------------------------------------
// graphs

/** One entry of `graphs`, normalised. */
export interface GraphSpec {
  /** The spec as written: `./file.ts:export`. */
  spec: string;
  /** File part, relative to the config file's directory (as written). */
  path: string;
  /** Export name inside that file. */
  exportName: string;
  /** `graphs.<id>.description`, or null. */
  description: string | null;
}

const EXPECTED_SPEC = 'expected "path:export"';
const EXPORT_NAME = /^[A-Za-z_$][\w$]*$/;

/** A graph spec must name its export (`./file.ts:graph`). */
function splitSpec(spec: string): { path: string; exportName: string } | undefined {
  const { file, exportName } = parseModuleSpec(spec);
  if (file === "" || exportName === undefined || !EXPORT_NAME.test(exportName)) return undefined;
  return { path: file, exportName };
}

const GraphEntrySchema = z.unknown().transform((value, ctx): GraphSpec => {
  let spec: unknown;
  let description: string | null = null;
  let specPath: PropertyKey[] = [];
  if (typeof value === "string") {
    spec = value;
  } else if (isPlainObject(value)) {
    spec = value.path;
    specPath = ["path"];
    if (value.description !== undefined && value.description !== null) {
      if (typeof value.description !== "string") {
        ctx.addIssue({ code: "custom", message: "expected a string", path: ["description"] });
        return z.NEVER;
      }
      description = value.description;
    }
  } else {
    ctx.addIssue({ code: "custom", message: `${EXPECTED_SPEC} or {"path": "path:export", "description"?: string}` });
    return z.NEVER;
  }
  const parts = typeof spec === "string" ? splitSpec(spec) : undefined;
  if (!parts) {
    ctx.addIssue({ code: "custom", message: EXPECTED_SPEC, path: specPath });
    return z.NEVER;
  }
  return { spec: spec as string, ...parts, description };
});

// ---------------------------------------------------------------------------------------------
// env

/** `env` as written: an object of values, a path to a `.env` file, or a list of variable names. */
export type EnvSpec =
  { kind: "values"; values: Record<string, string> } | { kind: "file"; path: string } | { kind: "names"; names: string[] } | { kind: "none" };

const EnvSchema = z
  .unknown()
  .optional()
  .transform((value, ctx): EnvSpec => {
    if (value === undefined || value === null) return { kind: "none" };
    if (typeof value === "string") {
      if (value.trim() === "") {
        ctx.addIssue({ code: "custom", message: "expected a path to a .env file" });
        return z.NEVER;
      }
      return { kind: "file", path: value };
    }
    if (Array.isArray(value)) {
      const bad = value.findIndex((v) => typeof v !== "string");
      if (bad >= 0) {
        ctx.addIssue({ code: "custom", message: "expected a variable name (string)", path: [bad] });
        return z.NEVER;
      }
      return { kind: "names", names: value as string[] };
    }
    if (isPlainObject(value)) {
      const values: Record<string, string> = {};
      for (const [key, v] of Object.entries(value)) {
        if (typeof v === "string") values[key] = v;
        else if (typeof v === "number" || typeof v === "boolean") values[key] = String(v);
        else {
          ctx.addIssue({ code: "custom", message: "expected a string, number or boolean", path: [key] });
          return z.NEVER;
        }
      }
      return { kind: "values", values };
    }
    ctx.addIssue({ code: "custom", message: "expected an object of variables or a path to a .env file" });
    return z.NEVER;
  });

// ---------------------------------------------------------------------------------------------
// http, webhooks, auth

export const HttpConfigSchema = z
  .looseObject({
    app: z.string().optional(),
    disable_assistants: z.boolean().default(false),
    disable_threads: z.boolean().default(false),
    disable_runs: z.boolean().default(false),
    disable_store: z.boolean().default(false),
    disable_meta: z.boolean().default(false),
    disable_ui: z.boolean().default(false),
    disable_mcp: z.boolean().default(false),
    disable_a2a: z.boolean().default(false),
    disable_webhooks: z.boolean().default(false),
    mount_prefix: z.string().optional(),
    /** Maximum request body size in bytes (server default applies when absent). */
    body_limit: z.number().int().positive().optional(),
    cors: z
      .looseObject({
        allow_origins: z.array(z.string()).optional(),
        allow_methods: z.array(z.string()).optional(),
        allow_headers: z.array(z.string()).optional(),
        allow_credentials: z.boolean().optional(),
        allow_origin_regex: z.string().optional(),
        expose_headers: z.array(z.string()).optional(),
        max_age: z.number().int().nonnegative().optional(),
      })
      .optional(),
    /**
     * Which request headers reach a run's `configurable` (src/app/configurable-headers.ts). The
     * official server reads `includes`/`excludes`, and `include`/`exclude` as older docs write them.
     */
    configurable_headers: z
      .looseObject({
        includes: z.array(z.string()).optional(),
        excludes: z.array(z.string()).optional(),
        include: z.array(z.string()).optional(),
        exclude: z.array(z.string()).optional(),
      })
      .optional()
      .transform((c) => ({ includes: c?.includes ?? c?.include ?? [], excludes: c?.excludes ?? c?.exclude ?? [] })),
  })
  .prefault({});
export type HttpConfig = z.output<typeof HttpConfigSchema>;

export const DEFAULT_WEBHOOK_ENV_PREFIX = "LG_WEBHOOK_";
/** `${{ env.VAR }}` inside a webhook header value. */
const HEADER_TEMPLATE = /\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export const WebhookUrlPolicySchema = z
  .looseObject({
    /** Exact host names or `*.example.com` wildcards; absent = any domain. */
    allowed_domains: z.array(z.string().min(1)).optional(),
    /** Absent = any port. */
    allowed_ports: z.array(z.number().int().min(1).max(65535)).optional(),
    max_url_length: z.number().int().positive().default(4096),
    require_https: z.boolean().default(false),
    /** Relative (in-process) webhook URLs are refused unless this is false. */
    disable_loopback: z.boolean().default(true),
    /** Loopback, private, link-local addresses refused (stricter than the official server); false for local development. */
    disable_private_ips: z.boolean().default(true),
  })
  .prefault({});
export type WebhookUrlPolicy = z.output<typeof WebhookUrlPolicySchema>;

export const WebhooksConfigSchema = z
  .looseObject({
    env_prefix: z.string().default(DEFAULT_WEBHOOK_ENV_PREFIX),
    headers: z.record(z.string(), z.string()).default({}),
    url: WebhookUrlPolicySchema,
    /** Optional filter of the run fields sent in the webhook body. */
    allowed_fields: z.array(z.string()).optional(),
  })
  .prefault({})
  .superRefine((webhooks, ctx) => {
    for (const [name, value] of Object.entries(webhooks.headers)) {
      for (const match of value.matchAll(HEADER_TEMPLATE)) {
        const variable = match[1]!;
        if (!variable.startsWith(webhooks.env_prefix)) {
          ctx.addIssue({
            code: "custom",
            message: `environment variable ${variable} must start with ${webhooks.env_prefix}`,
            path: ["headers", name],
          });
        }
      }
    }
  });
export type WebhooksConfig = z.output<typeof WebhooksConfigSchema>;

/** `path` names the `Auth` instance (`./auth.ts:auth`) that authenticates and authorizes every request (src/app/auth/). */
export const AuthConfigSchema = z.looseObject({
  path: z.string().optional(),
  disable_studio_auth: z.boolean().optional(),
});

/**
 * `store`: the semantic index (`index.embed` names an embedding function like a graph,
 * `./file.ts:export`) and TTL defaults. Expiry is swept by a timer at the next expiry, so
 * `ttl.sweep_interval_minutes` is accepted and not needed.
 */
export const StoreConfigSchema = z.looseObject({
  index: z
    .looseObject({
      dims: z.number().int().positive(),
      embed: z.string().min(1),
      fields: z.array(z.string()).min(1).optional(),
    })
    .optional(),
  ttl: z
    .looseObject({
      refresh_on_read: z.boolean().default(true),
      /** Minutes; items put without a `ttl` get this one. */
      default_ttl: z.number().positive().nullable().optional(),
      sweep_interval_minutes: z.number().positive().optional(),
    })
    .optional(),
});
export type StoreConfig = z.output<typeof StoreConfigSchema>;

/** What `checkpointer.ttl` does to a thread whose checkpoints outlived `default_ttl`. */
export const CheckpointTtlStrategySchema = z.enum(["delete", "keep_latest"], { error: 'expected "delete" or "keep_latest"' });
export type CheckpointTtlStrategy = z.output<typeof CheckpointTtlStrategySchema>;

/**
 * `checkpointer.ttl`, as the official config names it: every `sweep_interval_minutes` (default 5),
 * up to `sweep_limit` threads (default 1000) whose last activity is older than `default_ttl`
 * minutes are swept: `delete` removes all their checkpoints, `keep_latest` all but the latest of
 * each namespace. Without `default_ttl` nothing expires (src/app/checkpoint-ttl-sweeper.ts).
 */
export const CheckpointerConfigSchema = z.looseObject({
  ttl: z
    .looseObject({
      strategy: CheckpointTtlStrategySchema.default("delete"),
      /** Minutes. */
      default_ttl: z.number().positive().nullable().optional(),
      sweep_interval_minutes: z.number().positive().default(5),
      sweep_limit: z.number().int().positive().default(1000),
    })
    .nullable()
    .optional(),
});
export type CheckpointerConfig = z.output<typeof CheckpointerConfigSchema>;

// ---------------------------------------------------------------------------------------------
// the file

export const LanggraphConfigSchema = z.looseObject({
  graphs: z.record(z.string().min(1), GraphEntrySchema, {
    error: (issue) => (issue.input === undefined ? "required" : 'expected an object of graph_id -> "path:export"'),
  }),
  env: EnvSchema,
  http: HttpConfigSchema,
  webhooks: WebhooksConfigSchema,
  auth: AuthConfigSchema.optional(),
  store: StoreConfigSchema.optional(),
  checkpointer: CheckpointerConfigSchema.optional(),
  /** Generative UI: agent name -> component file (relative to langgraph.json), bundled at start. */
  ui: z.record(z.string().min(1), z.string().min(1)).optional(),
  /** `shared`: more packages the UI bundles leave to the host page (beside React and the SDK). */
  ui_config: z.looseObject({ shared: z.array(z.string()).optional() }).optional(),
});
export type LanggraphConfig = z.output<typeof LanggraphConfigSchema>;

function describeIssue(label: string, error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return `${label}: invalid`;
  const where = issue.path.length ? `${issue.path.map(String).join(".")}: ` : "";
  const message = issue.message.replace(/^Invalid input: /, "").replace(/\s+/g, " ");
  return `${label}: ${where}${message}`;
}

/** Validates already-parsed JSON. `label` prefixes error messages (normally the file name). */
export function parseLanggraphConfig(json: unknown, label = "langgraph.json"): LanggraphConfig {
  if (!isPlainObject(json)) throw new LanggraphConfigError(`${label}: expected a JSON object`);
  const result = LanggraphConfigSchema.safeParse(json);
  if (!result.success) throw new LanggraphConfigError(describeIssue(label, result.error));
  return result.data;
}

/** Reads the variables an `env` spec names (a `.env` path is relative to `baseDir`). */
export async function resolveEnv(spec: EnvSpec, baseDir: string, label = "langgraph.json"): Promise<Record<string, string>> {
  switch (spec.kind) {
    case "values":
      return { ...spec.values };
    case "file": {
      const file = path.resolve(baseDir, spec.path);
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (err) {
        throw new LanggraphConfigError(`${label}: env: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
      const parsed = parseEnv(text);
      const values: Record<string, string> = {};
      for (const [key, value] of Object.entries(parsed)) if (value !== undefined) values[key] = value;
      return values;
    }
    case "names":
    case "none":
      return {};
  }
}

/** Sets each variable that is not already set in `target`; returns the names it set. */
export function applyEnv(values: Record<string, string>, target: NodeJS.ProcessEnv = process.env): string[] {
  const applied: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    if (target[key] === undefined) {
      target[key] = value;
      applied.push(key);
    }
  }
  return applied;
}

export interface LoadedLanggraphConfig {
  /** Absolute path of the file. */
  configPath: string;
  /** Its directory: graph paths and a `.env` path are relative to it. */
  baseDir: string;
  config: LanggraphConfig;
  /** The variables of `env` (from the object or the .env file). */
  env: Record<string, string>;
  /** Names actually written to the environment (those that were not already set). */
  appliedEnv: string[];
}

export interface LoadLanggraphConfigOptions {
  /** Apply `env` to `processEnv` without overriding variables already set (default true). */
  applyEnv?: boolean;
  processEnv?: NodeJS.ProcessEnv;
}

/** Reads, validates and (by default) applies the `env` of a `langgraph.json`. */
export async function loadLanggraphConfig(configPath: string, options: LoadLanggraphConfigOptions = {}): Promise<LoadedLanggraphConfig> {
  const absolute = path.resolve(configPath);
  const label = path.basename(absolute);
  let text: string;
  try {
    text = await readFile(absolute, "utf8");
  } catch (err) {
    throw new LanggraphConfigError(`${label}: cannot read ${absolute}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new LanggraphConfigError(`${label}: invalid JSON: ${(err as Error).message.split("\n")[0]}`);
  }
  const config = parseLanggraphConfig(json, label);
  const baseDir = path.dirname(absolute);
  const env = await resolveEnv(config.env, baseDir, label);
  const appliedEnv = options.applyEnv === false ? [] : applyEnv(env, options.processEnv ?? process.env);
  return { configPath: absolute, baseDir, config, env, appliedEnv };
}

/**
 * The configured webhook headers with `${{ env.VAR }}` templates filled in from `env`
 * (the prefix rule was checked when the file was parsed).
 */
export function resolveWebhookHeaders(webhooks: WebhooksConfig, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(webhooks.headers)) {
    headers[name] = value.replace(HEADER_TEMPLATE, (_match, variable: string) => {
      const resolved = env[variable];
      if (resolved === undefined) {
        throw new LanggraphConfigError(`webhooks.headers.${name}: environment variable ${variable} is not set`);
      }
      return resolved;
    });
  }
  return headers;
}

// ---------------------------------------------------------------------------------------------
// LANGGRAPH_CONFIG

/** Config and context of a graph's default (system) assistant. */
export interface GraphDefaults {
  /** Everything but `context`: `configurable`, `tags`, `recursion_limit`, ... */
  config: JsonObject;
  context: JsonObject;
}

/**
 * Parses `LANGGRAPH_CONFIG` = JSON `{ "<graph_id>": { "configurable": {...}, "context": {...},
 * ...otherConfig } }` into per-graph default-assistant settings (`context` split out, as the JS
 * server does). Absent or empty → `{}`.
 */
export function parseLanggraphConfigEnv(raw: string | undefined): Record<string, GraphDefaults> {
  if (raw === undefined || raw.trim() === "") return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new LanggraphConfigError(`LANGGRAPH_CONFIG: invalid JSON: ${(err as Error).message.split("\n")[0]}`);
  }
  if (!isPlainObject(json)) throw new LanggraphConfigError("LANGGRAPH_CONFIG: expected a JSON object of graph_id -> config");
  const out: Record<string, GraphDefaults> = {};
  for (const [graphId, value] of Object.entries(json)) {
    if (!isPlainObject(value)) throw new LanggraphConfigError(`LANGGRAPH_CONFIG: ${graphId}: expected an object`);
    const { context, ...config } = value;
    if (context !== undefined && context !== null && !isPlainObject(context)) {
      throw new LanggraphConfigError(`LANGGRAPH_CONFIG: ${graphId}.context: expected an object`);
    }
    if (config.configurable !== undefined && !isPlainObject(config.configurable)) {
      throw new LanggraphConfigError(`LANGGRAPH_CONFIG: ${graphId}.configurable: expected an object`);
    }
    out[graphId] = { config, context: isPlainObject(context) ? context : {} };
  }
  return out;
}

/** Defaults for one graph (empty config and context when LANGGRAPH_CONFIG does not name it). */
export function graphDefaults(all: Record<string, GraphDefaults>, graphId: string): GraphDefaults {
  const found = all[graphId];
  return found ? { config: { ...found.config }, context: { ...found.context } } : { config: {}, context: {} };
}
