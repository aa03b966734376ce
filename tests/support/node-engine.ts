// The engine core served in this Node process: the same EngineCore and installEngine the Durable
// Object runs (docs/engineering.md Style §1), over an in-memory node:sqlite, behind a `ws` server on
// 127.0.0.1. Workers dial it as they dial `npm start` (`ws://…/`, channel ends at
// `/ws/channels/<id>`), so a worker's logic runs against the real engine's state, queues, triggers,
// streams and channels without a workerd process. What only workerd has — hibernation, the front
// door's auth, D1, Cloudflare Queues — stays with the e2e suites.
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { DatabaseSync } from "node:sqlite";
import { CHANNEL_DIRECTIONS, OPEN_GRANT, grantSchema, type ChannelDirection } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine, type Installed } from "@iii-edge/engine-do/core/install.ts";
import { CLOSE, type ChannelItem, type ChannelSocketPort } from "@iii-edge/engine-do/core/channels/hub.ts";
import { SocketConn } from "@iii-edge/engine-do/core/socket-conn.ts";
import { configuredQueues } from "./engine-server.ts";
import { nodeD1, nodePorts, trackedTimers } from "./node-sql.ts";

/** The parts of the `ws` package (iii-sdk's dependency) used here: @types/ws is not installed, and
 * a `declare module "ws"` would clash with the one tests/sdk declares for its own fake engine. */
interface WebSocket {
  readonly OPEN: number;
  readonly readyState: number;
  send(data: string | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: "message", fn: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): void;
  on(event: "close", fn: () => void): void;
}
interface WebSocketServer {
  readonly clients: Set<WebSocket>;
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: WebSocket) => void): void;
}
const { WebSocketServer } = createRequire(import.meta.url)("ws") as {
  WebSocketServer: new (opts: { noServer: true }) => WebSocketServer;
};
const CHANNEL_PATH = /\/ws\/channels\/([^/?]{1,128})$/;

export interface NodeEngine {
  /** What workers dial (as EngineServer.wsUrl). */
  wsUrl: string;
  core: EngineCore;
  installed: Installed;
  /** Close every socket, stop every timer. */
  stop(): Promise<void>;
}

/** Channel ends by id and direction, as the object's ChannelSockets keeps them by tag. */
class NodeChannelSockets implements ChannelSocketPort {
  readonly ends = new Map<string, WebSocket>();
  private key = (id: string, dir: ChannelDirection) => `${dir}:${id}`;
  add(id: string, dir: ChannelDirection, ws: WebSocket): void {
    this.ends.set(this.key(id, dir), ws);
  }
  remove(id: string, dir: ChannelDirection, ws: WebSocket): boolean {
    if (this.ends.get(this.key(id, dir)) !== ws) return false;
    this.ends.delete(this.key(id, dir));
    return true;
  }
  send(id: string, item: ChannelItem): boolean {
    const ws = this.ends.get(this.key(id, "read"));
    if (!ws || ws.readyState !== ws.OPEN) return false;
    ws.send(item.value);
    return true;
  }
  close(id: string, dir: ChannelDirection, code: number, reason: string): void {
    this.ends.get(this.key(id, dir))?.close(code, reason);
  }
  isOpen(id: string, dir: ChannelDirection): boolean {
    const ws = this.ends.get(this.key(id, dir));
    return ws !== undefined && ws.readyState === ws.OPEN;
  }
}

/** `vars`: the engine's vars as `startEngine`'s (QUEUES, …); wrangler.toml's QUEUES otherwise.
 * `tracing`: spans kept in an in-memory D1 (`engine::traces::list`), every trace sampled; off by
 * default, as the plain core tests have it. */
export async function startNodeEngine(opts: { vars?: Record<string, string>; tracing?: boolean } = {}): Promise<NodeEngine> {
  const db = new DatabaseSync(":memory:");
  const handles = new Set<ReturnType<typeof setTimeout>>();
  const timers = trackedTimers(handles);
  // The object's single alarm: one timer at the earliest time asked for.
  let alarm: { at: number; handle: unknown } | null = null;
  let core!: EngineCore;
  const ports = nodePorts(db, {
    clock: { now: () => Date.now() },
    timers,
    alarm: {
      request(at) {
        if (alarm && alarm.at <= at) return;
        if (alarm) timers.clear(alarm.handle);
        const handle = timers.set(
          () => {
            alarm = null;
            if (!stopped) void core.alarm();
          },
          Math.max(0, at - Date.now()),
        );
        alarm = { at, handle };
      },
    },
  });
  core = new EngineCore(ports, opts.tracing ? { telemetry: { vars: { TRACING: "on", TRACE_SAMPLE_RATIO: "1" }, db: nodeD1() } } : {});
  const installed = installEngine(core, { QUEUES: opts.vars?.QUEUES ?? configuredQueues() });
  const channels = new NodeChannelSockets();
  installed.channels.setSockets(channels);
  core.start([]);

  // After stop() the database is closed: late socket events find nothing to do.
  let stopped = false;
  const wss = new WebSocketServer({ noServer: true });
  const text = (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): string | ArrayBuffer => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    return isBinary ? buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) : buf.toString("utf8");
  };

  const refuse = (socket: Duplex, status: number, reason: string) => {
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  };

  const channel = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL, rawId: string) => {
    let id: string;
    try {
      id = decodeURIComponent(rawId);
    } catch {
      return refuse(socket, 400, "Bad Request");
    }
    const dir = url.searchParams.get("dir") as ChannelDirection;
    if (!CHANNEL_DIRECTIONS.includes(dir)) return refuse(socket, 400, "Bad Request");
    const verdict = installed.channels.authorize(id, url.searchParams.get("key") ?? "", dir);
    if (verdict === "not_found") return refuse(socket, 404, "Not Found");
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (verdict === "taken") return ws.close(CLOSE.endTaken.code, CLOSE.endTaken.reason);
      channels.add(id, dir, ws);
      ws.on("message", (data, isBinary) => {
        if (dir !== "write" || stopped) return;
        const raw = text(data, isBinary);
        installed.channels.write(id, typeof raw === "string" ? { type: "text", value: raw } : { type: "binary", value: raw });
      });
      ws.on("close", () => {
        if (channels.remove(id, dir, ws) && !stopped) installed.channels.closed(id, dir);
      });
      installed.channels.attached(id, dir);
    });
  };

  const worker = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const conn = new SocketConn(ws, randomUUID());
      ws.on("message", (data, isBinary) => {
        if (!stopped) core.message(conn, text(data, isBinary));
      });
      ws.on("close", () => {
        if (!stopped) core.disconnect(conn.workerId);
      });
      // A loopback client of an engine without auth gets the open grant, as from `npm start`. An
      // `x-iii-grant` header hands the socket over with that grant instead, as the front door does
      // once a token is verified (the wire suites' narrower grants; there is no front door here).
      const asked = req.headers["x-iii-grant"];
      const grant = typeof asked === "string" ? grantSchema.parse(JSON.parse(asked)) : OPEN_GRANT;
      core.connect(conn, randomUUID(), { grant, ip: "127.0.0.1" });
    });
  };

  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const ch = CHANNEL_PATH.exec(url.pathname);
    if (ch) channel(req, socket, head, url, ch[1]);
    else worker(req, socket, head);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;

  return {
    wsUrl: `ws://127.0.0.1:${port}`,
    core,
    installed,
    async stop() {
      stopped = true;
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((r) => server.close(() => r()));
      for (const h of handles) clearTimeout(h);
      handles.clear();
      db.close();
    },
  };
}
