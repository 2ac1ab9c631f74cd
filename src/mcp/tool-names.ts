/**
 * MCP tool names of assistants (pure). A tool name is 1 to 64 characters of `[A-Za-z0-9_-]`
 * (the MCP 2025-11-25 rule, which every client accepts): an assistant's name with every other
 * character made `_`. Names are made unique in the order given (oldest assistant first, so a new
 * assistant never renames an older one's tool): a repeated name gets `_2`, `_3`, ...
 */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_LENGTH = 64;

/** The tool name an assistant name asks for, before deduplication. */
export function toolNameOf(name: string): string {
  const safe = name
    .trim()
    .replace(/[^a-zA-Z0-9_-]+/g, "_")
    .slice(0, MAX_LENGTH);
  return safe === "" || /^_+$/.test(safe) ? "assistant" : safe;
}

/** Unique tool names for `names`, in order (index i names the i-th). */
export function uniqueToolNames(names: readonly string[]): string[] {
  const used = new Set<string>();
  return names.map((name) => {
    const base = toolNameOf(name);
    let candidate = base;
    for (let n = 2; used.has(candidate); n++) {
      const suffix = `_${n}`;
      candidate = base.slice(0, MAX_LENGTH - suffix.length) + suffix;
    }
    used.add(candidate);
    return candidate;
  });
}
