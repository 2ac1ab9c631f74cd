import { v5 as uuidv5 } from "uuid";

/** The official servers' namespace for default assistants (note: not RFC 4122's NAMESPACE_URL). */
export const NAMESPACE_GRAPH = "6ba7b821-9dad-11d1-80b4-00c04fd430c8";

/** `agent` → `fe096781-5601-53d2-b2f6-0d3403f7e9ca`, as both official servers compute it. */
export const defaultAssistantIdFor = (graphId: string): string => uuidv5(graphId, NAMESPACE_GRAPH);
