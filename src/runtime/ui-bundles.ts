/**
 * Generative UI: the `ui` key of langgraph.json maps agent names to component files (a module
 * whose default export maps component names to React components). Each is bundled once at start
 * with esbuild, in memory, as the official JS server's `@langchain/langgraph-ui` bundles it:
 *   - an entry that imports the file and exports `render(name, shadowRootId)`, which mounts the
 *     named component in the shadow root through the host page's `LGUI_EXT_STORE` (what the
 *     SDK's `LoadExternalComponent` provides);
 *   - an IIFE named `__LGUI_<agent>` for the browser; React, the SDK and `ui_config.shared`
 *     stay external, and their `require` is redirected to the host's `LGUI_REQUIRE`;
 *   - CSS imported by the components comes out as `entrypoint.css`.
 * (The official bundler also runs the Tailwind CSS plugin; that is not done here.) esbuild's
 * service is stopped after the bundles, as after loading graph files.
 */
import path from "node:path";
import type { Plugin } from "esbuild";
import { withEsbuild } from "../module-loader.js";

export interface UiAsset {
  basename: string;
  contents: Uint8Array;
}

/** Bundled assets by agent name (as many entries as `ui` has). */
export type UiBundles = ReadonlyMap<string, UiAsset[]>;

/** A component file that cannot be bundled; the message names the agent and the file. */
export class UiBundleError extends Error {
  override name = "UiBundleError";
}

/** The official bundler's render template (`libs/langgraph-ui/src/render.template.mts`), in plain JS. */
const RENDER_TEMPLATE = `
const STORE_SYMBOL = Symbol.for("LGUI_EXT_STORE");
function createRenderer(components) {
  return (name, shadowRootId) => {
    const root = document.getElementById(shadowRootId).shadowRoot;
    const renderEl = document.createElement("div");
    root.appendChild(renderEl);
    window[STORE_SYMBOL].respond(shadowRootId, components[name], renderEl);
  };
}
`;

const EXTERNAL = ["react", "react-dom", "@langchain/langgraph-sdk", "@langchain/langgraph-sdk/react-ui"];

/** The global the bundle assigns, as the official one names it. */
export const uiGlobalName = (agent: string) => `__LGUI_${agent.replace(/[^a-zA-Z0-9]/g, "_")}`;

function entrypointPlugin(cwd: string, file: string): Plugin {
  const full = path.resolve(cwd, file);
  let relative = path.relative(cwd, full).replaceAll(path.sep, "/");
  if (relative.startsWith("../") || path.isAbsolute(relative)) throw new Error(`the UI path must be inside the project (${file})`);
  if (!relative.startsWith("./")) relative = `./${relative}`;
  return {
    name: "entrypoint",
    setup(b) {
      b.onResolve({ filter: /^entrypoint$/ }, () => ({ path: path.resolve(path.dirname(full), "ui.entrypoint.tsx"), namespace: "entrypoint-ns" }));
      b.onLoad({ filter: /.*/, namespace: "entrypoint-ns" }, () => ({
        resolveDir: cwd,
        contents: [`import ui from ${JSON.stringify(relative)}`, RENDER_TEMPLATE, "export const render = createRenderer(ui)"].join("\n"),
        loader: "tsx",
      }));
    },
  };
}

/** The bundle's `require` of an external module, sent to the host page's loader. */
function redirectRequire(text: string): string {
  return text.replaceAll(
    `typeof require !== "undefined" ? require`,
    `typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]`,
  );
}

async function bundleOne(agent: string, file: string, cwd: string, shared: string[]): Promise<UiAsset[]> {
  const result = await withEsbuild(({ build }) =>
    build({
      write: false,
      outdir: path.resolve(cwd, "dist"),
      entryPoints: ["entrypoint"],
      bundle: true,
      platform: "browser",
      target: "es2020",
      jsx: "automatic",
      external: [...EXTERNAL, ...shared],
      plugins: [entrypointPlugin(cwd, file)],
      globalName: uiGlobalName(agent),
      logLevel: "silent",
    }),
  );
  const encoder = new TextEncoder();
  return result.outputFiles.map((out) => {
    const basename = path.basename(out.path);
    return { basename, contents: basename === "entrypoint.js" ? encoder.encode(redirectRequire(out.text)) : out.contents };
  });
}

/** Bundles every agent's components (paths relative to `cwd`, the langgraph.json directory). */
export async function bundleUi(defs: Record<string, string>, options: { cwd: string; shared?: string[] }): Promise<UiBundles> {
  const bundles = new Map<string, UiAsset[]>();
  for (const [agent, file] of Object.entries(defs)) {
    try {
      bundles.set(agent, await bundleOne(agent, file, options.cwd, options.shared ?? []));
    } catch (error) {
      const message = (error as Error).message.split("\n").slice(0, 3).join(" ");
      throw new UiBundleError(`langgraph.json: ui.${agent}: cannot bundle ${file}: ${message}`);
    }
  }
  return bundles;
}
