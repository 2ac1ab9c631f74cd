/**
 * A user's project with its own node_modules: its graphs run on its own copies of @langchain/langgraph,
 * @langchain/core and @langchain/langgraph-checkpoint, not the server's. The project here gets copies of
 * this repository's packages (distinct directories, hence distinct module instances: the split a project
 * install gives, without the network); every other package is a link to the server's.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import t from "tap";
import { exerciseProjectRuntime } from "../support/project-runtime.js";
import { StreamModeMapper } from "../../src/runtime/stream-modes.js";
import { findPackage, packageEntryUrl } from "../../src/module-loader.js";
import { startTestServer } from "../support/server.js";

const root = path.resolve(import.meta.dirname, "../..");

/** The LangGraph the server itself is developed on; another minor version is test/cli/project-runtime-other-minor.test.ts. */
t.test("a project's own LangGraph (the server's version): schemas, store batching, clean metadata, interrupts, nothing written to the project", (t) =>
  exerciseProjectRuntime(t, "@langchain/langgraph"),
);

t.test("an unsupported LangGraph is named in the error", async (t) => {
  const project = await mkdtemp(path.join(tmpdir(), "agent-server-old-project-"));
  t.teardown(() => rm(project, { recursive: true, force: true }));
  const pkg = path.join(project, "node_modules", "@langchain", "langgraph");
  await mkdir(pkg, { recursive: true });
  // A LangGraph of the 0.2 line as far as the check can tell: its version, and graphs without getGraphAsync.
  await writeFile(path.join(pkg, "package.json"), JSON.stringify({ name: "@langchain/langgraph", version: "0.2.74", type: "module", main: "index.js" }));
  await writeFile(path.join(pkg, "index.js"), "export const makeGraph = () => ({ invoke() {}, stream() {}, nodes: {} });\n");
  await writeFile(path.join(project, "graph.ts"), `import { makeGraph } from "@langchain/langgraph";\nexport const graph = makeGraph();\n`);
  await writeFile(path.join(project, "langgraph.json"), JSON.stringify({ graphs: { old: "./graph.ts:graph" } }));
  const error = await startTestServer({ env: { LANGGRAPH_JSON: path.join(project, "langgraph.json") } }).then(
    async (server) => {
      await server.close();
      return undefined;
    },
    (e: unknown) => e as Error,
  );
  t.ok(error, "the server does not start");
  t.match(error?.message, /is not a compiled LangGraph graph/, "says what is wrong");
  t.match(error?.message, /@langchain\/langgraph is 0\.2\.74/, "names the project's LangGraph version");
  t.match(error?.message, /supports \S+/, "and the supported range");
});

t.test("internal keys never reach message or checkpoint metadata", async (t) => {
  const mapper = new StreamModeMapper(["messages-tuple", "checkpoints"], false);
  const [tuple] = mapper.fromChunk(undefined, "messages", [
    { content: "x" },
    { langgraph_node: "n", __pregel_task_id: "t", __agent_server_defer_checkpoint_writes: true },
  ]);
  t.same((tuple.data as unknown[])[1], { langgraph_node: "n" }, "messages-tuple metadata");
  const [checkpoint] = mapper.fromChunk(undefined, "checkpoints", { config: {}, metadata: { step: 1, __pregel_task_id: "t" }, values: {} });
  t.same((checkpoint.data as { metadata: unknown }).metadata, { step: 1 }, "checkpoints metadata");
  const legacy = new StreamModeMapper(["messages"], false);
  const events = legacy.fromStreamEvent(
    { event: "on_chat_model_stream", data: { chunk: { id: "m1", content: "x" } }, metadata: { a: 1, __pregel_task_id: "t" } },
    "root",
  );
  t.same(events[0].data, { m1: { metadata: { a: 1 } } }, "messages/metadata");
});

t.test("the loader resolves a package's import entry as Node does", async (t) => {
  const pkg = findPackage("@langchain/langgraph-checkpoint", root)!;
  t.equal(packageEntryUrl(pkg), pathToFileURL(path.join(root, "node_modules", "@langchain", "langgraph-checkpoint", "dist", "index.js")).href);
  t.equal(findPackage("@langchain/no-such-package", root), undefined);
});
