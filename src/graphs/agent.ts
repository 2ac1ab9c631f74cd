/**
 * Example graph `agent` (registered in the repository root `langgraph.json`).
 *
 * State: `messages` (LangGraph `MessagesValue`: the messages reducer, so input messages may be
 * LangChain messages, serialized LangChain dicts `{type: "human", content}`, or OpenAI-style
 * `{role: "user" | "assistant" | "system" | "tool", content}`; `role: "user"` becomes a human
 * message). One node, `agent`.
 *
 * Offline by default (deterministic, no network): the node replies with an AIMessage
 *   content: `You said: <text of the last human message>` (`You said: ` with nothing else if
 *            there is no human message),
 *   id:      `ai-<n>` where n is the number of messages in the state before the reply
 *            (so the first reply on a fresh thread is `ai-1`).
 *
 * Optional real model: when the run's `config.configurable.model_name` (or the run context's
 * `model_name`) names a model AND both environment variables are set
 *   OPENAI_BASE_URL  base URL of an OpenAI-compatible API, e.g. `https://api.openai.com/v1`
 *   OPENAI_API_KEY   bearer token for that API
 * the node instead calls `POST {OPENAI_BASE_URL}/chat/completions` (undici) with the
 * conversation and replies with the first choice. Never exercised by the tests.
 */
import { AIMessage, type BaseMessage, type MessageContent } from "@langchain/core/messages";
import { END, type LangGraphRunnableConfig, MessagesValue, START, StateGraph, StateSchema } from "@langchain/langgraph";

export const AgentState = new StateSchema({ messages: MessagesValue });

type AgentStateValue = typeof AgentState.State;

/** Plain text of a message content (string, or the text parts of a content array). */
export function contentText(content: MessageContent | undefined): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content
    .map((part) => {
      if (typeof part === "string") return part;
      if (part && typeof part === "object" && part.type === "text" && typeof part.text === "string") {
        return part.text;
      }
      return "";
    })
    .join("");
}

/** The deterministic offline reply to a list of messages. */
export function offlineReply(messages: BaseMessage[]): AIMessage {
  const lastHuman = [...messages].reverse().find((m) => m.getType() === "human");
  return new AIMessage({
    id: `ai-${messages.length}`,
    content: `You said: ${contentText(lastHuman?.content)}`,
  });
}

function openAiRole(message: BaseMessage): string {
  switch (message.getType()) {
    case "human":
      return "user";
    case "ai":
      return "assistant";
    case "system":
      return "system";
    case "tool":
      return "tool";
    default:
      return "user";
  }
}

async function modelReply(modelName: string, baseUrl: string, apiKey: string, messages: BaseMessage[], signal: AbortSignal | undefined): Promise<AIMessage> {
  const url = `${baseUrl.replace(/\/+$/, "")}/chat/completions`;
  // Loaded only when a model is configured: the offline reply needs no HTTP client in memory.
  const { request } = await import("undici");
  const res = await request(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({
      model: modelName,
      messages: messages.map((m) => ({ role: openAiRole(m), content: contentText(m.content) })),
    }),
    signal,
  });
  const text = await res.body.text();
  if (res.statusCode >= 400) {
    throw new Error(`chat/completions returned HTTP ${res.statusCode}: ${text.slice(0, 500)}`);
  }
  const body = JSON.parse(text) as {
    id?: string;
    choices?: { message?: { content?: string | null } }[];
  };
  return new AIMessage({
    id: body.id ?? `ai-${messages.length}`,
    content: body.choices?.[0]?.message?.content ?? "",
    response_metadata: { model_name: modelName },
  });
}

async function agent(state: AgentStateValue, config: LangGraphRunnableConfig): Promise<Partial<AgentStateValue>> {
  const messages = state.messages ?? [];
  const fromConfigurable = config.configurable?.model_name;
  const fromContext = (config.context as Record<string, unknown> | undefined)?.model_name;
  const modelName =
    typeof fromConfigurable === "string" && fromConfigurable !== ""
      ? fromConfigurable
      : typeof fromContext === "string" && fromContext !== ""
        ? fromContext
        : undefined;
  const baseUrl = process.env.OPENAI_BASE_URL;
  const apiKey = process.env.OPENAI_API_KEY;
  if (modelName && baseUrl && apiKey) {
    return { messages: [await modelReply(modelName, baseUrl, apiKey, messages, config.signal)] };
  }
  return { messages: [offlineReply(messages)] };
}

export const builder = new StateGraph(AgentState).addNode("agent", agent).addEdge(START, "agent").addEdge("agent", END);

export const graph = builder.compile();
graph.name = "agent";
