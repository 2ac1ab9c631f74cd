/** `context`: returns the run's context (`runtime.context`) as its state, to show what a run was given. */
import { Annotation, START, StateGraph } from "@langchain/langgraph";

export const graph = new StateGraph(Annotation.Root({ model: Annotation<string | undefined>() }), Annotation.Root({ model: Annotation<string>() }))
  .addNode("use_context", (_state, runtime) => ({ model: (runtime.context as { model?: string } | undefined)?.model }))
  .addEdge(START, "use_context")
  .compile();
