import t from "tap";
import path from "node:path";
import vm from "node:vm";
import { repoRoot, startTestServer } from "../support/server.js";

/**
 * Generative UI: the `ui` components of langgraph.json bundled at start and served as the SDK's
 * `LoadExternalComponent` loads them (POST /ui/{agent}, then the assets), with the official
 * suite's own expectations ("generative ui" in libs/langgraph-api/tests/api.test.mts).
 */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");
const UI_DISABLED = path.join(repoRoot, "test", "graphs", "parity", "langgraph.ui-disabled.json");

t.test("POST /ui/{agent} and the bundled assets", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY, LANGGRAPH_API_KEY: "ui-key" } });
  t.teardown(() => srv.close());
  const base = srv.url; // http://127.0.0.1:<port>

  const html = await srv.client["~ui"].getComponent("agent-alias", "weather-component");
  t.ok(
    html.includes(`<script src="${base}/ui/agent-alias/entrypoint.js" onload='__LGUI_agent_alias.render("weather-component", "{{shadowRootId}}")'></script>`),
    `the script the SDK injects, as the official server writes it: ${html}`,
  );
  t.ok(html.includes(`<link rel="stylesheet" href="${base}/ui/agent-alias/entrypoint.css" />`), "the components' CSS");

  // Assets are public (a <script src> carries no key); the component list is not.
  const js = await fetch(`${base}/ui/agent-alias/entrypoint.js`);
  t.equal(js.status, 200);
  t.equal(js.headers.get("content-type"), "text/javascript; charset=utf-8");
  const code = await js.text();
  t.ok(code.includes(`globalThis[Symbol.for("LGUI_REQUIRE")]`), "React and the SDK come from the host page");
  const css = await fetch(`${base}/ui/agent-alias/entrypoint.css`);
  t.equal(css.status, 200);
  t.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
  t.match(await css.text(), /\.weather\s*\{\s*color: rebeccapurple;/);
  const keyless = await fetch(`${base}/ui/agent-alias`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "weather-component" }),
  });
  t.equal(keyless.status, 401, "POST /ui needs the API key as every API route");

  t.test("the bundle renders the named component through the host page's store", async (t) => {
    // The host page's side of LoadExternalComponent: a shadow root, LGUI_EXT_STORE, LGUI_REQUIRE.
    const rendered: { shadowRootId: string; component: unknown; into: unknown }[] = [];
    const shadowRoot = {
      children: [] as unknown[],
      appendChild(el: unknown) {
        this.children.push(el);
      },
    };
    const jsx = (type: unknown, props: Record<string, unknown>) => ({ type, props });
    const window: Record<PropertyKey, unknown> = {
      [Symbol.for("LGUI_EXT_STORE")]: {
        respond: (shadowRootId: string, component: unknown, into: unknown) => rendered.push({ shadowRootId, component, into }),
      },
    };
    const sandbox: Record<PropertyKey, unknown> = {
      window,
      document: { getElementById: (id: string) => (id === "root-1" ? { shadowRoot } : null), createElement: (tag: string) => ({ tag }) },
      [Symbol.for("LGUI_REQUIRE")]: (name: string) => {
        if (name === "react/jsx-runtime") return { jsx, jsxs: jsx, Fragment: "Fragment" };
        throw new Error(`unexpected require(${name})`);
      },
    };
    const context = vm.createContext(sandbox);
    vm.runInContext(code, context);
    const global = vm.runInContext("__LGUI_agent_alias", context) as { render(name: string, root: string): void };
    global.render("weather-component", "root-1");
    t.equal(rendered.length, 1);
    t.equal(rendered[0].shadowRootId, "root-1");
    t.same(shadowRoot.children, [{ tag: "div" }], "a render element in the shadow root");
    t.equal(rendered[0].into, shadowRoot.children[0]);
    const element = (rendered[0].component as (p: { city: string }) => { type: string; props: { className: string; children: unknown[] } })({ city: "Paris" });
    t.same(
      element,
      { type: "div", props: { className: "weather", children: ["Weather for ", "Paris"] } },
      "the user's component, compiled with the automatic JSX runtime",
    );
  });

  t.test("unknown agents and files: 404; a body without a name: 422", async (t) => {
    await t.rejects(srv.client["~ui"].getComponent("non-existent", "none"), /404/, "through the SDK, as the official suite expects");
    const headers = { "content-type": "application/json", "x-api-key": "ui-key" };
    const unknown = await fetch(`${base}/ui/non-existent`, { method: "POST", headers, body: JSON.stringify({ name: "x" }) });
    t.equal(unknown.status, 404);
    t.same(await unknown.json(), { detail: 'UI not found for agent "non-existent"' });
    t.equal((await fetch(`${base}/ui/agent-alias/nope.js`)).status, 404);
    t.equal((await fetch(`${base}/ui/non-existent/entrypoint.js`)).status, 404);
    const noName = await fetch(`${base}/ui/agent-alias`, { method: "POST", headers, body: JSON.stringify({}) });
    t.equal(noName.status, 422);
  });

  t.test("a component name cannot break out of the onload attribute", async (t) => {
    const res = await fetch(`${base}/ui/agent-alias`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "ui-key" },
      body: JSON.stringify({ name: `x'><img src=y onerror=alert(1)>` }),
    });
    const text = await res.text();
    t.notOk(text.includes("'><img"), text);
    t.ok(text.includes(`render("x\\u0027>\\u003cimg src=y onerror=alert(1)>", "{{shadowRootId}}")'`));
  });
});

t.test("http.disable_ui: no UI routes", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: UI_DISABLED } });
  t.teardown(() => srv.close());
  const res = await fetch(`${srv.url}/ui/agent-alias`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "weather-component" }),
  });
  t.equal(res.status, 404);
  t.equal((await fetch(`${srv.url}/ui/agent-alias/entrypoint.js`)).status, 404);
});
