import net from "node:net";

/** An HTTP answer read off a raw socket: status, headers (lower-case names), body (chunked decoded). */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server sent. */
  raw: string;
}

/** `{host, port}` of a server URL. */
export function addressOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/**
 * The first HTTP response in `raw` (undefined when it has not all arrived: no status line, headers
 * cut, body short; with `headOnly`, once its status line and headers have, the body as far as it came).
 */
export function parseAnswer(raw: string, headOnly = false): RawAnswer | undefined {
  let start = 0;
  // Interim answers (100 Continue) precede the final one.
  for (;;) {
    const end = raw.indexOf("\r\n\r\n", start);
    if (end === -1) return undefined;
    const [statusLine, ...lines] = raw.slice(start, end).split("\r\n");
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
    if (!match) return undefined;
    const status = Number(match[1]);
    if (status >= 100 && status < 200) {
      start = end + 4;
      continue;
    }
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const rest = raw.slice(end + 4);
    if (headOnly) return { status, headers, body: rest, raw };
    if (headers["transfer-encoding"] === "chunked") {
      let body = "";
      let at = 0;
      for (;;) {
        const eol = rest.indexOf("\r\n", at);
        if (eol === -1) return undefined;
        const size = parseInt(rest.slice(at, eol), 16);
        if (size === 0) return { status, headers, body, raw };
        if (rest.length < eol + 2 + size) return undefined;
        body += rest.slice(eol + 2, eol + 2 + size);
        at = eol + 2 + size + 2;
      }
    }
    const length = Number(headers["content-length"] ?? 0);
    if (rest.length < length) return undefined; // latin1: one char a byte
    return { status, headers, body: rest.slice(0, length), raw };
  }
}

/**
 * Sends `request` exactly as written (no path normalization, unlike fetch) and resolves with the
 * server's first response once it has arrived whole, or with `undefined` when the server closed
 * the connection without one. Rejects when neither happens within `deadlineMs`.
 */
export function sendRaw(
  url: string,
  request: string | Buffer,
  deadlineMs = 5000,
  options: { headOnly?: boolean; halfClose?: boolean } = {},
): Promise<RawAnswer | undefined> {
  const { host, port } = addressOf(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    let raw = "";
    let settled = false;
    const done = (error: Error | undefined, answer?: RawAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(answer);
    };
    const timer = setTimeout(
      () => done(new Error(`no answer within ${deadlineMs} ms to ${JSON.stringify(String(request).slice(0, 120))}; got ${JSON.stringify(raw.slice(0, 200))}`)),
      deadlineMs,
    );
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      raw += chunk;
      const answer = parseAnswer(raw, options.headOnly);
      if (answer) done(undefined, answer);
    });
    // A reset after the answer was written is still an answer; without one it is a close.
    socket.on("error", () => done(undefined, parseAnswer(raw, true)));
    socket.on("close", () => done(undefined, parseAnswer(raw, true)));
    socket.write(request);
    if (options.halfClose) socket.end();
  });
}

/** A request line and headers (`Host` unless given, and `Connection: close`), and an optional body (with its Content-Length unless framing is given). */
export function rawRequest(method: string, target: string, headers: Record<string, string> = {}, body?: string): string {
  const given = (name: string) => Object.keys(headers).some((h) => h.toLowerCase() === name);
  const lines = [`${method} ${target} HTTP/1.1`, ...(given("host") ? [] : ["Host: 127.0.0.1"]), "Connection: close"];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (body !== undefined && !given("content-length") && !given("transfer-encoding")) {
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n${body ?? ""}`;
}
