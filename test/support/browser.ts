import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import { once } from "node:events";
import os from "node:os";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { repoRoot } from "./server.js";

/** Debian's Chromium (`.ci/run` installs it when missing). */
export const CHROMIUM = "/usr/bin/chromium";
export const hasChromium = () => existsSync(CHROMIUM);
/**
 * The `skip` option of a browser test: it runs whenever Chromium is there, and always in CI
 * (`CI` set), where a missing Chromium must fail the test rather than hide it. Only a developer's
 * machine without Chromium skips it, saying why.
 */
export const skipWithoutBrowser = (): false | string => (hasChromium() || process.env.CI ? false : `no ${CHROMIUM} (.ci/run installs it)`);

/** The official SDK bundled for the browser at test time: `window.LangGraph.Client`, plus `extra` code. */
export async function bundleSdkForBrowser(extra = ""): Promise<string> {
  const { build } = await import("esbuild");
  const result = await build({
    stdin: { contents: `export { Client } from "@langchain/langgraph-sdk";\n${extra}`, resolveDir: repoRoot, loader: "ts" },
    bundle: true,
    format: "iife",
    globalName: "LangGraph",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0].text;
}

/** A browser app bundled from one entry file (TSX with React's automatic runtime), minified as production React. */
export async function bundleApp(entry: string): Promise<string> {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [entry],
    absWorkingDir: repoRoot,
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    minify: true,
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0].text;
}

const SDK_PAGE = '<!doctype html><html><head><script src="/sdk.js"></script></head><body>sdk page</body></html>';
/** A page for an app that renders into `#root`. */
export const APP_PAGE = '<!doctype html><html><head><meta charset="utf-8"></head><body><div id="root"></div><script src="/sdk.js"></script></body></html>';

/** A second origin on 127.0.0.1: serves one page (any query string) that loads the bundle. */
export async function servePage(bundle: string, html = SDK_PAGE): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? "/", "http://page").pathname;
    if (pathname === "/sdk.js") {
      res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
    } else if (pathname === "/") {
      res.writeHead(200, { "content-type": "text/html" }).end(html);
    } else {
      res.writeHead(404).end();
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Headless Chromium with a fresh profile and no background traffic (the machine has no network). */
export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = await mkdtemp(path.join(os.tmpdir(), "agent-server-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
