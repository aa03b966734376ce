// The few parts of the `ws` package (a dependency of iii-sdk) that the TypeScript benches use;
// @types/ws is not installed.
declare module "ws" {
  import type { EventEmitter } from "node:events";
  import type { IncomingMessage } from "node:http";
  namespace WebSocket {
    type RawData = Buffer | ArrayBuffer | Buffer[];
  }
  class WebSocket extends EventEmitter {
    constructor(url: string, options?: { perMessageDeflate?: boolean; headers?: Record<string, string>; maxPayload?: number });
    send(data: string): void;
    terminate(): void;
    close(code?: number): void;
    on(event: "message", listener: (data: WebSocket.RawData, isBinary: boolean) => void): this;
    // biome-ignore lint/suspicious/noExplicitAny: the ws package's own listener signature
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: "unexpected-response", listener: (req: unknown, res: IncomingMessage) => void): this;
    // biome-ignore lint/suspicious/noExplicitAny: the ws package's own listener signature
    once(event: string, listener: (...args: any[]) => void): this;
    off(event: "message", listener: (data: WebSocket.RawData, isBinary: boolean) => void): this;
    // biome-ignore lint/suspicious/noExplicitAny: the ws package's own listener signature
    off(event: string, listener: (...args: any[]) => void): this;
  }
  export default WebSocket;
}
