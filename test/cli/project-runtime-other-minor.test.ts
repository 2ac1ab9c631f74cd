/**
 * A project on another minor version of @langchain/langgraph than the server is developed on (the
 * dev dependency alias `langgraph-1-5`), served and driven as test/cli/project-runtime.test.ts does.
 */
import t from "tap";
import { exerciseProjectRuntime } from "../support/project-runtime.js";

t.test("a project's own LangGraph (another minor version): schemas, store batching, clean metadata, interrupts, nothing written to the project", (t) =>
  exerciseProjectRuntime(t, "langgraph-1-5"),
);
