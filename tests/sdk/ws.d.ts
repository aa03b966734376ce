// The few parts of the `ws` package (a dependency of iii-sdk, used here only as a test server)
// that the fake engine uses; @types/ws is not installed.
declare module "ws" {
  import type { EventEmitter } from "node:events";
  export class WebSocket extends EventEmitter {
    send(data: string): void;
    terminate(): void;
    close(code?: number): void;
  }
  export class WebSocketServer extends EventEmitter {
    constructor(options: { host?: string; port?: number });
    address(): import("node:net").AddressInfo | string;
    close(cb?: () => void): void;
    on(event: "connection", listener: (socket: WebSocket) => void): this;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
}
