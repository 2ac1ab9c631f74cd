/**
 * `annotation`: an Annotation state whose channels say what they hold (messages reducer, a list
 * default, a number default, a plain value). `functional`: a functional-API graph, no state schema.
 */
import { Annotation, END, MessagesAnnotation, START, StateGraph, entrypoint } from "@langchain/langgraph";

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  tags: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  score: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  note: Annotation<string>,
});

export const annotation = new StateGraph(State)
  .addNode("rate", () => ({ score: 1 }))
  .addEdge(START, "rate")
  .addEdge("rate", END)
  .compile();

export const functional = entrypoint("functional", async (input: { n: number }) => ({ doubled: input.n * 2 }));
