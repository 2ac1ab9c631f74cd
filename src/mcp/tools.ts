/**
 * Assistants as MCP tools: one tool per assistant the caller may see, named after it (unique,
 * valid MCP names), described by it or its graph, taking its graph's input; a call is a
 * stateless run of the assistant with the arguments as input, through the application core
 * (custom auth's `threads:create_run` and `assistants:read`, then RunsService), waited for as
 * `/runs/wait` does. The list shows what `assistants:search` lets the caller see, as
 * `POST /assistants/search`; a call names only a listed tool.
 */
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import type { Caller } from "../app/auth/caller.js";
import { visibleAssistants } from "../app/visible-assistants.js";
import type { Assistant } from "../domain/assistants.js";
import type { RunRequest } from "../domain/run-request.js";
import { uniqueToolNames } from "./tool-names.js";
import { splitArguments, toolInput, type JsonSchema, type ToolInput } from "./tool-schema.js";
import { errorResult, toolResult, type ToolResult } from "./tool-result.js";
import { applicationErrorDetail, invalidParams } from "./errors.js";

export interface Tool {
  name: string;
  title: string;
  description: string;
  inputSchema: JsonSchema;
}

interface Entry {
  tool: Tool;
  assistant: Assistant;
  takesContext: boolean;
}

/** Tools per `tools/list` page: a client follows `nextCursor` for more. */
export const TOOLS_PAGE = 100;

type Headers = Record<string, string | string[] | undefined>;

export class McpTools {
  /** Per graph (the registry is fixed while the server runs, so this holds at most one entry per graph). */
  private readonly inputs = new Map<string, Promise<ToolInput>>();

  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
  ) {}

  private inputOf(graphId: string): Promise<ToolInput> {
    let input = this.inputs.get(graphId);
    if (!input) {
      input = this.ctx
        .runtime()
        .then(({ graphs }) => graphs.schemas(graphId))
        .then((s) => toolInput(s.input_schema, s.context_schema));
      input.catch(() => this.inputs.delete(graphId));
      this.inputs.set(graphId, input);
    }
    return input;
  }

  /** Every tool of the caller, in a stable order (oldest assistant first). */
  private async catalogue(caller: Caller): Promise<Entry[]> {
    // An assistant of a graph no longer in langgraph.json cannot run: it is no tool.
    const assistants = (await visibleAssistants(this.ctx, caller)).filter((a) => this.ctx.graphs.has(a.graph_id));
    const names = uniqueToolNames(assistants.map((a) => a.name));
    return Promise.all(
      assistants.map(async (assistant, i) => {
        const { inputSchema, takesContext } = await this.inputOf(assistant.graph_id);
        const description =
          assistant.description ||
          this.ctx.graphs.description(assistant.graph_id) ||
          `Runs the LangGraph graph "${assistant.graph_id}" (assistant ${assistant.assistant_id}).`;
        return { tool: { name: names[i], title: assistant.name, description, inputSchema }, assistant, takesContext };
      }),
    );
  }

  /** One page of `tools/list`; the cursor is the position of the page's first tool. */
  async list(caller: Caller, cursor: string | undefined): Promise<{ tools: Tool[]; nextCursor?: string }> {
    const start = cursor === undefined ? 0 : /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
    if (start === undefined) throw invalidParams(`Invalid params: unknown cursor ${JSON.stringify(cursor)}`);
    const all = await this.catalogue(caller);
    const end = start + TOOLS_PAGE;
    return { tools: all.slice(start, end).map((e) => e.tool), ...(end < all.length ? { nextCursor: String(end) } : {}) };
  }

  /**
   * Runs the tool's assistant and waits for its end (`signal`: the client went away). The
   * application's refusals (custom auth, an invalid request) are the tool's error, for the model to read.
   */
  async call(caller: Caller, name: string, args: Record<string, unknown>, headers: Headers, signal: AbortSignal): Promise<ToolResult> {
    const entry = (await this.catalogue(caller)).find((e) => e.tool.name === name);
    if (!entry) throw invalidParams(`Unknown tool: ${name}`);
    const { input, context } = splitArguments(args, entry.takesContext);
    // The client that asked is the only one waiting: gone, the run has no one to answer.
    const request: RunRequest = { assistant_id: entry.assistant.assistant_id, input, ...(context ? { context } : {}), on_disconnect: "cancel" };
    let runId: string;
    try {
      runId = (await this.runs.create(await this.runs.authorize(caller, null, request), headers)).run_id;
    } catch (error) {
      const detail = applicationErrorDetail(error);
      if (detail !== undefined) return errorResult(detail);
      throw error;
    }
    const cancel = () => {
      if (!this.runs.lifecycle.isDone(runId)) void this.runs.cancel(null, runId, "interrupt").catch(() => undefined);
    };
    signal.addEventListener("abort", cancel, { once: true });
    try {
      return toolResult(await this.runs.lifecycle.waitResult(runId, signal));
    } finally {
      signal.removeEventListener("abort", cancel);
    }
  }
}
