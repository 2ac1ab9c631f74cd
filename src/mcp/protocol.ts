/**
 * MCP protocol versions (pure): the revisions this server speaks, the negotiation of `initialize`
 * (the client's version when we speak it, else our latest, which the client may refuse) and the
 * `MCP-Protocol-Version` header of later requests (absent: 2025-03-26, as the spec says).
 */
export const SUPPORTED_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const;
export type ProtocolVersion = (typeof SUPPORTED_VERSIONS)[number];
export const LATEST_VERSION: ProtocolVersion = SUPPORTED_VERSIONS[0];
/** What a request without the header is taken to speak (MCP 2025-06-18, "Protocol Version Header"). */
export const HEADERLESS_VERSION: ProtocolVersion = "2025-03-26";

const isSupported = (v: unknown): v is ProtocolVersion => typeof v === "string" && (SUPPORTED_VERSIONS as readonly string[]).includes(v);

/** The version `initialize` answers for the client's `protocolVersion`. */
export function negotiate(requested: unknown): ProtocolVersion {
  return isSupported(requested) ? requested : LATEST_VERSION;
}

/** The version a request's header names; undefined when it names one we do not speak (a 400). */
export function headerVersion(header: string | string[] | undefined): ProtocolVersion | undefined {
  const value = (Array.isArray(header) ? header[header.length - 1] : header)?.trim();
  if (!value) return HEADERLESS_VERSION;
  return isSupported(value) ? value : undefined;
}
