import t from "tap";
import path from "node:path";
import { bundleSdkForBrowser, launchChromium, servePage, skipWithoutBrowser } from "../support/browser.js";
import { repoRoot, startTestServer } from "../support/server.js";

/**
 * Generative UI in a real browser: a page on another origin renders the parity project's
 * `weather-component` with the SDK's own `LoadExternalComponent` (React 18, the SDK's
 * `react-ui`), which asks POST /ui/{agent}, injects the answer into a shadow root, loads the
 * bundle and its CSS from this server, and renders the component through its store.
 */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");

/** The host page: React, the SDK client and LoadExternalComponent, bundled for the browser. */
const HOST = `
import * as React from "react";
import { createRoot } from "react-dom/client";
import { Client as SdkClient } from "@langchain/langgraph-sdk";
import { LoadExternalComponent } from "@langchain/langgraph-sdk/react-ui";
export function renderUi(apiUrl, city) {
  const app = document.createElement("div");
  app.id = "app";
  document.body.appendChild(app);
  const stream = { client: new SdkClient({ apiUrl }), assistantId: "agent-alias" };
  const message = { id: "ui-1", type: "ui", name: "weather-component", props: { city } };
  createRoot(app).render(React.createElement(LoadExternalComponent, { stream, message, fallback: "loading" }));
}
`;

t.test("LoadExternalComponent renders a bundled component", { skip: skipWithoutBrowser() }, async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  // React's development build reads process.env.NODE_ENV: the page defines it.
  const bundle = `var process = { env: { NODE_ENV: "production" } };\n${await bundleSdkForBrowser(HOST)}`;
  const page = await servePage(bundle);
  t.teardown(() => page.close());
  const browser = await launchChromium();
  t.teardown(() => browser.close());

  const tab = await browser.context.newPage();
  const errors: string[] = [];
  tab.on("pageerror", (error) => errors.push(error.message));
  await tab.goto(page.url);
  await tab.evaluate(
    (apiUrl) => (globalThis as unknown as { LangGraph: { renderUi(url: string, city: string): void } }).LangGraph.renderUi(apiUrl, "Paris"),
    srv.url,
  );

  const weather = tab.locator(".weather"); // Playwright's CSS locators pierce open shadow roots
  await weather.waitFor({ timeout: 20_000 });
  t.equal(await weather.textContent(), "Weather for Paris", "the component rendered with the message's props");
  // Run in the page (DOM types are not in this project's lib): the computed colour, the injected script.
  type Dom = {
    getComputedStyle(el: unknown): { color: string };
    document: { querySelector(s: string): { shadowRoot?: { querySelector(s: string): { getAttribute(n: string): string } | null } } | null };
  };
  t.equal(
    await weather.evaluate((el) => (globalThis as unknown as Dom).getComputedStyle(el).color),
    "rgb(102, 51, 153)",
    "the bundle's CSS applies inside the shadow root",
  );
  const scriptSrc = await tab.evaluate(() =>
    (globalThis as unknown as Dom).document.querySelector("#app > div")?.shadowRoot?.querySelector("script")?.getAttribute("src"),
  );
  t.equal(scriptSrc, `${srv.url}/ui/agent-alias/entrypoint.js`, "the script the server named, loaded from it");
  t.same(errors, [], "no error on the page");
});
