/** `agent`: the example graph of the repository root (compiled-graph export). */
export { graph } from "../../src/graphs/agent.js";
