// A raw iii connection for Node suites (Node's own WebSocket, with upgrade headers as undici allows),
// and the status an upgrade is answered with (for refusals, which a WebSocket object cannot see).
import http from "node:http";
import { randomBytes, randomUUID } from "node:crypto";

// biome-ignore lint/suspicious/noExplicitAny: frames as read off the wire by tests, each field checked by an expect
export type Frame = Record<string, any>;

/** Status of a WebSocket upgrade of `url` with `headers`: 101, or the refusal's status and JSON body. */
export function upgradeStatus(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Frame | null; protocol?: string }> {
  const u = new URL(url.replace(/^ws/, "http"));
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: `${u.pathname}${u.search}`,
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        ...headers,
      },
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 101, body: null, protocol: res.headers["sec-websocket-protocol"] as string | undefined });
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        let body: Frame | null = null;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

export class RawSocket {
  /** Frames not yet taken by `next`. */
  readonly frames: Frame[] = [];
  /** Every frame received, in order (never taken). */
  readonly received: Frame[] = [];
  workerId = "";
  private readonly ws: WebSocket;
  private waiters: { pred: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  closed = false;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener("message", (ev) => {
      if (typeof ev.data !== "string") return;
      const f = JSON.parse(ev.data) as Frame;
      this.frames.push(f);
      this.received.push(f);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(f)) return true;
        w.resolve(f);
        return false;
      });
    });
    ws.addEventListener("close", () => (this.closed = true));
  }

  /** Open `url` with `headers` and wait for `workerregistered`. */
  static async open(url: string, headers: Record<string, string> = {}): Promise<RawSocket> {
    const ws = new WebSocket(url, { headers } as unknown as string[]);
    const s = new RawSocket(ws);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error(`could not open ${url}`)), { once: true });
    });
    s.workerId = (await s.next((f) => f.type === "workerregistered")).worker_id;
    return s;
  }

  send(frame: Frame): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The next frame (already received or arriving) that matches. */
  next(pred: (f: Frame) => boolean, ms = 10_000): Promise<Frame> {
    const have = this.frames.find(pred);
    if (have) {
      this.frames.splice(this.frames.indexOf(have), 1);
      return Promise.resolve(have);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("timed out waiting for a frame")), ms);
      this.waiters.push({
        pred,
        resolve: (f) => {
          clearTimeout(timer);
          this.frames.splice(this.frames.indexOf(f), 1);
          resolve(f);
        },
      });
    });
  }

  /** Call and wait for the result frame. */
  async call(function_id: string, data: unknown = {}, extra: Frame = {}, ms = 10_000): Promise<Frame> {
    const invocation_id = randomUUID();
    this.send({ type: "invokefunction", invocation_id, function_id, data, ...extra });
    return this.next((f) => f.type === "invocationresult" && f.invocation_id === invocation_id, ms);
  }

  /** Call and return the result, throwing the error body. */
  async ok<T = unknown>(function_id: string, data: unknown = {}, extra: Frame = {}): Promise<T> {
    const r = await this.call(function_id, data, extra);
    if (r.error) throw Object.assign(new Error(`${function_id}: ${r.error.code} ${r.error.message}`), { code: r.error.code });
    return r.result as T;
  }

  /** Register `id` and answer its calls with `fn` (or never, if it returns NO_REPLY). */
  serve(id: string, fn: (data: Frame) => unknown): void {
    this.send({ type: "registerfunction", id });
    this.ws.addEventListener("message", (ev) => {
      if (typeof ev.data !== "string") return;
      const f = JSON.parse(ev.data) as Frame;
      if (f.type !== "invokefunction" || f.function_id !== id) return;
      const out = fn(f.data);
      // Without an invocation id nobody waits for the result (as iii-sdk: run it, send nothing).
      if (out === NO_REPLY || f.invocation_id === undefined) return;
      this.send({ type: "invocationresult", invocation_id: f.invocation_id, function_id: id, result: out });
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.addEventListener("close", () => resolve(), { once: true });
      this.ws.close(1000, "done");
    });
  }
}

export const NO_REPLY = Symbol("no reply");

/** Send `n` calls on `s` at once; resolve with each one's result frame. */
export function flood(s: RawSocket, fn: string, n: number, timeout_ms = 60_000): Promise<Frame[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const invocation_id = `${fn}-${s.workerId}-${i}`;
    ids.push(invocation_id);
    s.send({ type: "invokefunction", invocation_id, function_id: fn, data: { i }, timeout_ms });
  }
  return Promise.all(ids.map((id) => s.next((f) => f.type === "invocationresult" && f.invocation_id === id, 90_000)));
}
