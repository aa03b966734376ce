// A scriptable stand-in for the engine: a real WebSocket server (the `ws` package) on 127.0.0.1
// that records every frame and lets a test answer, drop connections and restart.
import { WebSocketServer, type WebSocket } from "ws";
import type { AddressInfo } from "node:net";

export interface FakeConnection {
  socket: WebSocket;
  frames: Record<string, unknown>[];
  workerId: string;
  send(frame: Record<string, unknown>): void;
}

export class FakeEngine {
  connections: FakeConnection[] = [];
  private server!: WebSocketServer;
  private waiters: (() => void)[] = [];
  port = 0;
  /** Called for each frame; default: none (tests answer explicitly). */
  onFrame: (conn: FakeConnection, frame: Record<string, unknown>) => void = () => {};

  async start(port = 0): Promise<void> {
    this.server = new WebSocketServer({ host: "127.0.0.1", port });
    await new Promise<void>((r) => this.server.once("listening", () => r()));
    this.port = (this.server.address() as AddressInfo).port;
    this.server.on("connection", (socket) => {
      const n = this.connections.length + 1;
      const conn: FakeConnection = {
        socket,
        frames: [],
        workerId: `worker-${n}`,
        send: (f) => socket.send(JSON.stringify(f)),
      };
      this.connections.push(conn);
      conn.send({ type: "workerregistered", worker_id: conn.workerId, reattach_token: `token-${n}` });
      socket.on("message", (data: unknown) => {
        const frame = JSON.parse(String(data)) as Record<string, unknown>;
        conn.frames.push(frame);
        this.onFrame(conn, frame);
        this.notify();
      });
      this.notify();
    });
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}/`;
  }

  get last(): FakeConnection {
    const c = this.connections[this.connections.length - 1];
    if (!c) throw new Error("no connection yet");
    return c;
  }

  private notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Wait (bounded) until `pred` holds; re-checked on every connection and frame. */
  async until<T>(pred: () => T | undefined | false, timeoutMs = 5_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = pred();
      if (v) return v;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("condition not met in time");
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 100));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Kill every socket without a close handshake (like a crashed engine). */
  dropAll(): void {
    for (const c of this.connections) c.socket.terminate();
  }

  async stop(): Promise<void> {
    this.dropAll();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start(this.port);
  }
}

export function types(frames: Record<string, unknown>[]): string[] {
  return frames.map((f) => (f.type === "invokefunction" ? `invokefunction:${String(f.function_id)}` : String(f.type)));
}
