// A worker connection (`Conn`) over a socket that takes text frames: the workerd WebSocket of the
// engine object and of a connection shard, or a test's fake. The frame bound applies to what the
// engine sends as to what it accepts.
import { MAX_FRAME_BYTES, byteSize, type EngineFrame } from "@iii-edge/protocol";
import type { Conn } from "./ports.ts";

/** What a Conn needs of a socket. */
export interface TextSocket {
  send(text: string): void;
  close(code?: number, reason?: string): void;
}

export class SocketConn implements Conn {
  readonly workerId: string;
  private readonly ws: TextSocket;
  constructor(ws: TextSocket, workerId: string) {
    this.ws = ws;
    this.workerId = workerId;
  }
  send(frame: EngineFrame): boolean | "too_large" {
    try {
      const text = JSON.stringify(frame);
      // byteSize counts bytes only when the length alone cannot decide.
      if (byteSize(text) > MAX_FRAME_BYTES) return "too_large";
      this.ws.send(text);
      return true;
    } catch {
      return false;
    }
  }
  close(code: number, reason: string): void {
    try {
      this.ws.close(code, reason);
    } catch {
      // already closed
    }
  }
}
