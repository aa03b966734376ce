// Host end of a sandbox worker's engine connection. The guest has no network: its runtime
// (guest/worker/runtime.mjs) carries each TCP connection its worker makes to 127.0.0.1:49134 over
// the VM's "engine" virtio-serial port, multiplexed. Here each such connection is handed to a
// small HTTP server on a unix socket that terminates the guest's WebSocket; for every worker
// socket the relay opens its own WebSocket to the engine, carrying the sandbox's token (the guest
// never sees it), and passes frames both ways after checking each one the guest sends:
// registrations only under the sandbox's prefix, calls only to what it may call, no reattach,
// and at most so many frames a second. The check holds even when the engine runs open (no
// AUTH_SECRET); with a token the engine enforces the same grant again.
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { globMatch, MAX_FRAME_BYTES } from "@iii-edge/protocol";
import WebSocket, { WebSocketServer, type RawData } from "ws";
import {
  RELAY_FRAME_BURST,
  RELAY_FRAMES_PER_SECOND,
  RELAY_MAX_CONNECTIONS,
  RELAY_MAX_OPENS_PER_MINUTE,
  RELAY_MUX_FRAME_LIMIT,
  RELAY_UPSTREAM_CONNECT_MS,
} from "../limits.ts";

/** Calls a worker makes about itself; the engine exempts them from grants too. */
const SELF_CALLS = new Set(["engine::workers::register"]);

export interface WorkerExit {
  code: number | null;
  signal: string | null;
  error?: string;
  log_tail: string;
}

export interface RelayPolicy {
  /** Function-id / trigger-type-id prefix the worker may register under. */
  prefix: string;
  /** Function-id globs the worker may call (its own prefix is always included). */
  call: string[];
  /** Trigger types it may bind; undefined: any (bindings must still target its own functions). */
  bind?: string[];
}

export interface RelayEvents {
  /** The worker's code was handed to the worker process. */
  onRunning?(): void;
  /** The worker process exited (it is not restarted). */
  onExit(exit: WorkerExit): void;
  /** An invocation of one of the worker's functions arrived: it is in use. */
  onActivity(): void;
  /** A registration went through (functions() changed). */
  onRegistered?(): void;
  /** The worker broke a hard rule (frame flood, connection churn): the caller stops the sandbox. */
  onViolation(reason: string): void;
  log(msg: string): void;
}

export interface RelayOptions extends RelayEvents {
  /** Host end of the VM's engine port, paused right after the runtime's hello. */
  socket: net.Socket;
  /** Unix socket path for the relay's WebSocket server (inside the host's state dir). */
  listenPath: string;
  /** The engine's worker URL (ws://…/ or ws://…/ns/<namespace>). */
  engineUrl: string;
  /** Bearer token for the upstream connection, minted for this sandbox; none on an open engine. */
  token?: string;
  policy: RelayPolicy;
}

interface Registration {
  id: string;
  description?: string;
  conn: number;
}
interface Dialled {
  ws: WebSocket;
  /** True once open; false when the engine refused or could not be reached. */
  open: Promise<boolean>;
  /** Frames the engine sent before the guest's WebSocket was paired with this one. */
  early: { data: RawData; isBinary: boolean }[];
  stopBuffering(): void;
}
interface Trigger {
  id: string;
  trigger_type: string;
  function_id: string;
  conn: number;
}

const frame = (type: string, conn: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const head = Buffer.alloc(9);
  head.write(type, 0, "latin1");
  head.writeUInt32BE(conn, 1);
  head.writeUInt32BE(payload.length, 5);
  return Buffer.concat([head, payload]);
};

export class WorkerRelay {
  private readonly o: RelayOptions;
  private readonly server: http.Server;
  private readonly wss: WebSocketServer;
  /** Mux connection id → the host-side TCP leg into the relay server. */
  private readonly legs = new Map<number, net.Socket>();
  private readonly registrations = new Map<string, Registration>();
  private readonly boundTriggers = new Map<string, Trigger>();
  private readonly refusedIds: string[] = [];
  private readonly sockets = new Set<WebSocket>();
  private buf: Buffer = Buffer.alloc(0);
  private tokens = RELAY_FRAME_BURST;
  private lastRefill = Date.now();
  private opens: number[] = [];
  private firstOpenedAt: number | undefined;
  private nextConn = 1;
  private closed = false;
  private listening: Promise<void>;
  /** An upstream connection opened ahead of the worker's first one (saves a handshake with the
   * engine on the spawn's critical path), with the frames the engine sent on it meanwhile. */
  private spare: Dialled | undefined;
  /** Why the last upstream connection failed, for a spawn that never saw its functions. */
  lastUpstreamError: string | undefined;

  constructor(o: RelayOptions) {
    this.o = o;
    this.wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
    this.server = http.createServer((_req, res) => {
      res.writeHead(404).end();
    });
    this.server.on("upgrade", (req, sock, head) => this.upgrade(req, sock as net.Socket, head));
    fs.rmSync(o.listenPath, { force: true });
    this.listening = new Promise((resolve) => this.server.listen(o.listenPath, resolve));
    o.socket.on("data", (d: Buffer) => this.onMux(d));
    o.socket.on("error", () => {});
    void this.listening.then(() => o.socket.resume());
    this.spare = this.dial();
  }

  private dial(): Dialled {
    const headers: Record<string, string> = this.o.token ? { Authorization: `Bearer ${this.o.token}` } : {};
    const ws = new WebSocket(this.o.engineUrl, {
      headers,
      perMessageDeflate: false,
      maxPayload: MAX_FRAME_BYTES,
      handshakeTimeout: RELAY_UPSTREAM_CONNECT_MS,
    });
    const early: { data: RawData; isBinary: boolean }[] = [];
    const onEarly = (data: RawData, isBinary: boolean) => early.push({ data, isBinary });
    ws.on("message", onEarly);
    const open = new Promise<boolean>((resolve) => {
      ws.once("unexpected-response", (_r, res) => {
        this.lastUpstreamError = `the engine refused the sandbox's connection with HTTP ${res.statusCode}`;
        this.o.log(this.lastUpstreamError);
        res.resume();
        resolve(false);
      });
      ws.once("error", (e) => {
        this.lastUpstreamError ??= `the engine could not be reached: ${e.message}`;
        resolve(false);
      });
      ws.once("open", () => resolve(true));
    });
    void open.then((ok) => {
      if (!ok) ws.terminate();
    });
    return { ws, open, early, stopBuffering: () => ws.off("message", onEarly) };
  }

  /** Hand the worker its code: files (path → bytes), the entry file and its environment. */
  start(spec: { files: Record<string, Buffer>; entry: string; env: Record<string, string> }): void {
    const files = Object.fromEntries(Object.entries(spec.files).map(([p, b]) => [p, b.toString("base64")]));
    this.o.socket.write(frame("S", 0, Buffer.from(JSON.stringify({ files, entry: spec.entry, env: spec.env }))));
  }

  /** Functions the worker holds now (registered through a live connection). */
  functions(): { function_id: string; description?: string }[] {
    return [...this.registrations.values()].map((r) =>
      r.description === undefined ? { function_id: r.id } : { function_id: r.id, description: r.description },
    );
  }

  triggers(): { id: string; trigger_type: string; function_id: string }[] {
    return [...this.boundTriggers.values()].map(({ id, trigger_type, function_id }) => ({ id, trigger_type, function_id }));
  }

  /** Registrations refused by the prefix rule (most recent last). */
  refused(): string[] {
    return [...this.refusedIds];
  }

  /** Close every connection: the engine drops the worker's functions at once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.spare?.ws.terminate();
    for (const ws of this.sockets) ws.terminate();
    for (const leg of this.legs.values()) leg.destroy();
    this.legs.clear();
    this.registrations.clear();
    this.boundTriggers.clear();
    this.server.close();
    fs.rmSync(this.o.listenPath, { force: true });
  }

  // ---------------------------------------------------------------- the mux from the guest

  private onMux(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    while (this.buf.length >= 9 && !this.closed) {
      const type = String.fromCharCode(this.buf[0]!);
      const conn = this.buf.readUInt32BE(1);
      const len = this.buf.readUInt32BE(5);
      if (len > RELAY_MUX_FRAME_LIMIT)
        return this.o.onViolation(`the guest runtime sent a ${len}-byte frame (limit ${RELAY_MUX_FRAME_LIMIT})`);
      if (this.buf.length < 9 + len) return;
      const payload = Buffer.from(this.buf.subarray(9, 9 + len));
      this.buf = this.buf.subarray(9 + len);
      this.onMuxFrame(type, conn, payload);
    }
  }

  private onMuxFrame(type: string, conn: number, payload: Buffer): void {
    switch (type) {
      case "O": {
        const now = Date.now();
        this.firstOpenedAt ??= now;
        this.opens = this.opens.filter((t) => now - t < 60_000);
        this.opens.push(now);
        if (this.opens.length > RELAY_MAX_OPENS_PER_MINUTE)
          return this.o.onViolation(`more than ${RELAY_MAX_OPENS_PER_MINUTE} connections a minute`);
        if (this.legs.size >= RELAY_MAX_CONNECTIONS) {
          this.o.socket.write(frame("C", conn));
          return;
        }
        const leg = net.connect(this.o.listenPath);
        this.legs.set(conn, leg);
        leg.on("data", (d: Buffer) => {
          for (let off = 0; off < d.length; off += RELAY_MUX_FRAME_LIMIT)
            this.o.socket.write(frame("D", conn, d.subarray(off, off + RELAY_MUX_FRAME_LIMIT)));
        });
        leg.on("error", () => {});
        leg.on("close", () => {
          if (this.legs.get(conn) === leg) {
            this.legs.delete(conn);
            if (!this.closed) this.o.socket.write(frame("C", conn));
          }
        });
        return;
      }
      case "D":
        this.legs.get(conn)?.write(payload);
        return;
      case "C": {
        const leg = this.legs.get(conn);
        this.legs.delete(conn);
        leg?.end();
        return;
      }
      case "R":
        this.o.onRunning?.();
        return;
      case "X": {
        let exit: WorkerExit;
        try {
          exit = JSON.parse(payload.toString("utf8")) as WorkerExit;
        } catch {
          exit = { code: null, signal: null, error: "unreadable exit report", log_tail: "" };
        }
        this.o.onExit(exit);
        return;
      }
      default:
        this.o.onViolation(`the guest runtime sent an unknown frame type ${JSON.stringify(type)}`);
    }
  }

  // ---------------------------------------------------------------- WebSocket termination

  private upgrade(req: http.IncomingMessage, sock: net.Socket, head: Buffer): void {
    const path = (req.url ?? "/").split("?")[0]!;
    if (path.endsWith("/otel")) {
      // Telemetry stays in the guest: accept (so the SDK does not retry forever) and drop.
      this.wss.handleUpgrade(req, sock, head, (ws) => ws.on("message", () => {}));
      return;
    }
    if (path !== "/") {
      sock.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    const conn = this.nextConn++;
    const dialled = this.spare ?? this.dial();
    this.spare = undefined;
    void dialled.open.then((ok) => {
      if (!ok || dialled.ws.readyState !== WebSocket.OPEN) {
        sock.end("HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      if (this.closed) return dialled.ws.terminate();
      this.wss.handleUpgrade(req, sock, head, (guest) => {
        dialled.stopBuffering();
        this.pair(conn, guest, dialled.ws);
        // What the engine said before the guest was there (workerregistered) goes first.
        for (const m of dialled.early) guest.send(m.data, { binary: m.isBinary });
      });
    });
  }

  private pair(conn: number, guest: WebSocket, up: WebSocket): void {
    this.sockets.add(guest);
    this.sockets.add(up);
    const drop = () => {
      this.sockets.delete(guest);
      this.sockets.delete(up);
      // The engine unregisters what this connection held when it closes.
      for (const [id, r] of this.registrations) if (r.conn === conn) this.registrations.delete(id);
      for (const [id, t] of this.boundTriggers) if (t.conn === conn) this.boundTriggers.delete(id);
      guest.terminate();
      up.terminate();
    };
    guest.on("close", drop);
    up.on("close", drop);
    guest.on("error", drop);
    up.on("error", drop);
    up.on("message", (data: RawData, isBinary: boolean) => {
      if (!isBinary && this.isInvocation(data)) this.o.onActivity();
      if (guest.readyState === WebSocket.OPEN) guest.send(data, { binary: isBinary });
    });
    guest.on("message", (data: RawData, isBinary: boolean) => {
      if (!this.take()) {
        this.o.onViolation(`frame flood: more than ${RELAY_FRAMES_PER_SECOND} frames a second (burst ${RELAY_FRAME_BURST})`);
        return drop();
      }
      if (isBinary) return; // telemetry or junk: the control socket carries JSON text
      let f: Record<string, unknown>;
      try {
        f = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        return;
      }
      if (typeof f !== "object" || f === null) return;
      const verdict = this.check(conn, f);
      if (verdict.reply && guest.readyState === WebSocket.OPEN) guest.send(JSON.stringify(verdict.reply));
      if (verdict.forward && up.readyState === WebSocket.OPEN) up.send(data.toString());
    });
  }

  private isInvocation(data: RawData): boolean {
    // Cheap test first: only invokefunction frames count as use.
    const text = data.toString();
    if (!text.includes('"invokefunction"')) return false;
    try {
      return (JSON.parse(text) as { type?: string }).type === "invokefunction";
    } catch {
      return false;
    }
  }

  /** Token bucket over the guest's frames. */
  private take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(RELAY_FRAME_BURST, this.tokens + ((now - this.lastRefill) / 1000) * RELAY_FRAMES_PER_SECOND);
    this.lastRefill = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private mayCall(id: string): boolean {
    const p = this.o.policy;
    return SELF_CALLS.has(id) || id.startsWith(p.prefix) || p.call.some((g) => globMatch(g, id));
  }

  private refuse(what: string): { code: string; message: string } {
    this.refusedIds.push(what);
    if (this.refusedIds.length > 32) this.refusedIds.shift();
    this.o.log(`refused: ${what}`);
    return { code: "forbidden", message: `sandbox worker: ${what} (this sandbox may register only under '${this.o.policy.prefix}')` };
  }

  /** Forward, or answer in the engine's place. */
  private check(conn: number, f: Record<string, unknown>): { forward: boolean; reply?: unknown } {
    const p = this.o.policy;
    const str = (k: string) => (typeof f[k] === "string" ? (f[k] as string) : "");
    switch (f.type) {
      case "registerfunction": {
        const id = str("id");
        if (!id.startsWith(p.prefix))
          return { forward: false, reply: { type: "error", error: this.refuse(`may not register function ${id}`) } };
        // An HTTP-invoked function is one the engine calls over the network for it: that would be
        // the network the VM does not have.
        if (f.invocation !== undefined)
          return { forward: false, reply: { type: "error", error: this.refuse(`may not register ${id} as an HTTP-invoked function`) } };
        const r: Registration = { id, conn };
        if (typeof f.description === "string") r.description = f.description;
        this.registrations.set(id, r);
        this.o.onRegistered?.();
        return { forward: true };
      }
      case "unregisterfunction": {
        const id = str("id");
        if (!id.startsWith(p.prefix))
          return { forward: false, reply: { type: "error", error: this.refuse(`may not unregister function ${id}`) } };
        this.registrations.delete(id);
        return { forward: true };
      }
      case "registertriggertype":
      case "unregistertriggertype": {
        const id = str("id");
        if (!id.startsWith(p.prefix))
          return { forward: false, reply: { type: "error", error: this.refuse(`may not register trigger type ${id}`) } };
        return { forward: true };
      }
      case "registertrigger": {
        const fid = str("function_id");
        const tt = str("trigger_type");
        const bad = !fid.startsWith(p.prefix)
          ? `may not bind a trigger to ${fid}, which is not its own`
          : p.bind && !p.bind.some((g) => globMatch(g, tt))
            ? `may not bind trigger type ${tt}`
            : undefined;
        if (bad)
          return {
            forward: false,
            reply: { type: "triggerregistrationresult", id: f.id, trigger_type: tt, function_id: fid, error: this.refuse(bad) },
          };
        this.boundTriggers.set(str("id"), { id: str("id"), trigger_type: tt, function_id: fid, conn });
        this.o.onRegistered?.();
        return { forward: true };
      }
      case "unregistertrigger":
        this.boundTriggers.delete(str("id"));
        return { forward: true };
      case "invokefunction": {
        const fid = str("function_id");
        if (this.mayCall(fid)) return { forward: true };
        const error = { code: "forbidden", message: `sandbox worker may not call ${fid}` };
        return {
          forward: false,
          reply:
            typeof f.invocation_id === "string"
              ? { type: "invocationresult", invocation_id: f.invocation_id, function_id: fid, error }
              : undefined,
        };
      }
      case "invocationresult":
      case "triggerregistrationresult":
      case "registerservice":
      case "ping":
      case "pong":
        return { forward: true };
      default:
        // reattach (the relay's upstream connection is the worker's identity) and anything unknown.
        return { forward: false };
    }
  }

  /** When the guest first opened a connection (Date.now()), if it has. */
  get firstOpenAt(): number | undefined {
    return this.firstOpenedAt;
  }

  /** Resolves when the relay's server listens. */
  get ready(): Promise<void> {
    return this.listening;
  }
}
