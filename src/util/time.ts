/**
 * Timestamps as the API writes them: ISO 8601 in UTC with a `+00:00` offset, the Python server's
 * format (A2A v1.0 converts them to `Z` at its own edge).
 */
export const isoOf = (ms: number): string => new Date(ms).toISOString().replace("Z", "+00:00");

export const isoNow = (): string => isoOf(Date.now());
