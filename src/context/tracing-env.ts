/** The variables @langchain/core reads to decide whether to trace to LangSmith (utils/callbacks.js, callbacks/manager.js). */
const TRACING_V2_VARIABLES = ["LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGCHAIN_TRACING"];

/** Whether LangSmith tracing is configured in `env`, as @langchain/core decides it. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return TRACING_V2_VARIABLES.some((name) => env[name] === "true") || !!env.LANGCHAIN_TRACING;
}
