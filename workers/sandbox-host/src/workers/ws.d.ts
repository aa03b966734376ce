// The parts of the `ws` package (a root dependency, pinned) the relay uses; @types/ws is not installed.
declare module "ws" {
  import type { EventEmitter } from "node:events";
  import type { IncomingMessage } from "node:http";
  import type { Duplex } from "node:stream";
  export type RawData = Buffer | ArrayBuffer | Buffer[];
  export interface ClientOptions {
    headers?: Record<string, string>;
    perMessageDeflate?: boolean;
    maxPayload?: number;
    handshakeTimeout?: number;
  }
  export default class WebSocket extends EventEmitter {
    static readonly OPEN: 1;
    constructor(url: string, options?: ClientOptions);
    readonly readyState: 0 | 1 | 2 | 3;
    send(data: RawData | string, options?: { binary?: boolean }): void;
    terminate(): void;
    close(code?: number, reason?: string): void;
    on(event: "message", listener: (data: RawData, isBinary: boolean) => void): this;
    on(event: "close" | "open", listener: () => void): this;
    on(event: "error", listener: (e: Error) => void): this;
    once(event: "unexpected-response", listener: (req: unknown, res: IncomingMessage) => void): this;
    once(event: "error", listener: (e: Error) => void): this;
    once(event: "open", listener: () => void): this;
    off(event: "message", listener: (data: RawData, isBinary: boolean) => void): this;
  }
  export class WebSocketServer extends EventEmitter {
    constructor(options: { noServer: true; maxPayload?: number; perMessageDeflate?: boolean });
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, cb: (ws: WebSocket) => void): void;
  }
}
