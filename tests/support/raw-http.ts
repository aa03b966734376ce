// One HTTP request with exactly the headers given: fetch adds some (Origin, Sec-Fetch-*) and refuses
// others, which the front door's tests must control. The body comes back parsed when it is JSON.
import http from "node:http";

export interface RawAnswer {
  status: number;
  body: { result?: unknown; error?: { code: string; message: string } } & Record<string, unknown>;
  text: string;
  ms: number;
}

export function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Buffer,
): Promise<RawAnswer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      { method, headers: body === undefined ? headers : { "content-length": String(Buffer.byteLength(body)), ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let parsed: RawAnswer["body"] = {};
          try {
            parsed = JSON.parse(text) as RawAnswer["body"];
          } catch {
            // not JSON: `text` says what
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text, ms: Date.now() - started });
        });
      },
    );
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}
