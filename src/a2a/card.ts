/**
 * The agent card of an assistant (pure). One document for both protocol versions: the v0.3 fields
 * (`protocolVersion`, `url`, `preferredTransport`) and the v1.0 `supportedInterfaces`, which list
 * the same JSON-RPC endpoint for 1.0 and 0.3 (a v1.0 client picks the 1.0 entry).
 */
import type { Assistant } from "../domain/assistants.js";

export interface GraphInputShape {
  /** The graph's input has a `messages` key (text parts are accepted). */
  acceptsMessages: boolean;
  properties: string[];
  required: string[];
}

export interface CardOptions {
  assistant: Assistant;
  graph: GraphInputShape;
  /** Public base URL without a trailing slash. */
  baseUrl: string;
  /** Server version. */
  version: string;
  /** An API key protects /a2a/... (the card says how to send it). */
  apiKey: boolean;
  pushNotifications: boolean;
}

export function agentCard(o: CardOptions): Record<string, unknown> {
  const { assistant, graph } = o;
  const url = `${o.baseUrl}/a2a/${assistant.assistant_id}`;
  const description = assistant.description || `${assistant.name} assistant`;
  const inputModes = graph.acceptsMessages ? ["text/plain", "application/json"] : ["application/json"];
  const outputModes = ["text/plain", "application/json"];
  const card: Record<string, unknown> = {
    protocolVersion: "0.3.0",
    name: assistant.name,
    description,
    url,
    preferredTransport: "JSONRPC",
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
    ],
    version: o.version,
    capabilities: { streaming: true, pushNotifications: o.pushNotifications, stateTransitionHistory: false },
    defaultInputModes: inputModes,
    defaultOutputModes: outputModes,
    skills: [
      {
        id: `${assistant.assistant_id}-main`,
        name: `${assistant.name} Capabilities`,
        description,
        tags: ["assistant", "langgraph", `graph:${assistant.graph_id}`],
        examples: [],
        inputModes,
        outputModes,
        metadata: { inputSchema: { required: graph.required, properties: graph.properties, supportsA2A: graph.acceptsMessages } },
      },
    ],
  };
  if (o.apiKey) {
    card.securitySchemes = { apiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "The server's LANGGRAPH_API_KEY" } };
    card.security = [{ apiKey: [] }];
  }
  return card;
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v)?.split(",")[0]?.trim() || undefined;

/**
 * The base URL clients reach us at: PUBLIC_URL when configured; else the request's own host,
 * honouring `X-Forwarded-Proto` / `X-Forwarded-Host` set by a proxy in front of us.
 */
export function publicBaseUrl(configured: string | undefined, headers: Record<string, string | string[] | undefined>, fallbackHost: string): string {
  if (configured) return configured.replace(/\/+$/, "");
  const proto = first(headers["x-forwarded-proto"]) ?? "http";
  const host = first(headers["x-forwarded-host"]) ?? first(headers.host) ?? fallbackHost;
  return `${proto}://${host}`;
}
