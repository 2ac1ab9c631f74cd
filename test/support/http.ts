import type { Test } from "tap";

/** One bad request and what the server must answer: method, path, JSON body, status, detail pattern. */
export type ErrorCase = [method: string, path: string, body: unknown, status: number, detail: RegExp];

/** Sends each request and checks the status and the `{"detail"}` body. */
export async function expectErrors(t: Test, baseUrl: string, cases: ErrorCase[]): Promise<void> {
  for (const [method, path, body, status, detail] of cases) {
    const res = await fetchJson(`${baseUrl}${path}`, method, body);
    const json = (await res.json()) as { detail: string };
    t.equal(res.status, status, `${method} ${path} ${JSON.stringify(body) ?? ""} → ${status} (${json.detail})`);
    t.match(json.detail, detail);
  }
}

/** A request with an optional JSON body; the response as it comes (its headers first, its body still to read). */
export function fetchJson(url: string, method: string, body?: unknown): Promise<Response> {
  return fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** A request with an optional JSON body: the status and the parsed answer (undefined when empty). */
export async function callJson<T = Record<string, unknown>>(url: string, method: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetchJson(url, method, body);
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}
