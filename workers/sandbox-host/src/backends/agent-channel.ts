// Host end of the guest agent's wire protocol (guest/agent.sh has the grammar). A message is a
// header line whose last N fields are byte counts, followed by exactly those raw bytes.
import type { Socket } from "node:net";
import { SandboxError } from "../errors.ts";

/** Answer kind -> number of trailing byte blobs its header announces. */
const TRAILING_BLOBS: Record<string, number> = { H: 0, P: 0, E: 0, O: 1, X: 2, W: 1, R: 1 };

/** How long a closed channel waits for the VM's exit to explain why, before failing on its own. */
const CLOSE_GRACE_MS = 2_000;

/** Longest header line the agent ever sends; anything longer means the stream is corrupt. */
const MAX_HEADER_BYTES = 256;

export interface AgentAnswer {
  fields: string[];
  blobs: Buffer[];
}

interface Waiter {
  id: string;
  resolve: (a: AgentAnswer) => void;
  reject: (e: Error) => void;
  onChunk?: (streamNo: string, bytes: Buffer) => void;
}

export class AgentChannel {
  readonly ready: Promise<void>;
  private socket: Socket;
  private buf: Buffer = Buffer.alloc(0);
  private head: { fields: string[]; lens: number[] } | undefined;
  private waiter: Waiter | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  private failure: Error | undefined;
  private markReady!: () => void;
  private failReady!: (e: Error) => void;

  constructor(socket: Socket) {
    this.socket = socket;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    this.ready.catch(() => {});
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("error", () => {});
    // The VM's exit handler fails the channel with the real cause (exit code, panic text); the
    // socket usually closes a moment earlier, so give that handler a head start.
    socket.on("close", () => {
      setTimeout(() => this.fail(new SandboxError("guest_crashed", "the guest agent closed its channel")), CLOSE_GRACE_MS).unref();
    });
  }

  /** Reject whatever is waiting and every later request with `err`. First failure wins. */
  fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.failReady(err);
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(err);
    this.socket.destroy();
  }

  /**
   * Send one request and wait for its answer. Requests are serialised: the agent reads exact byte
   * counts, so a pipelined request could be swallowed by the one before it. `onHang` runs when
   * no answer arrives within `timeoutMs`; the request then fails with exec_timeout, and what
   * `onHang` returns (the guest console's tail) goes into the message: it is the only account of
   * why the guest went silent once the VM is gone.
   */
  request(
    op: string,
    args: (string | number)[],
    payload: Uint8Array[],
    timeoutMs: number,
    onHang: () => string | undefined,
    onChunk?: (streamNo: string, bytes: Buffer) => void,
  ): Promise<AgentAnswer> {
    const run = () =>
      new Promise<AgentAnswer>((resolve, reject) => {
        if (this.failure) return reject(this.failure);
        const id = String(this.nextId++);
        const timer = setTimeout(() => {
          this.waiter = undefined;
          const detail = onHang();
          reject(
            new SandboxError(
              "exec_timeout",
              `the guest did not answer within ${timeoutMs} ms; the sandbox was destroyed${detail ? ` (${detail})` : ""}`,
            ),
          );
        }, timeoutMs);
        this.waiter = {
          id,
          onChunk,
          resolve: (a) => {
            clearTimeout(timer);
            resolve(a);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        this.socket.write(Buffer.concat([Buffer.from(`${[op, id, ...args].join(" ")}\n`), ...payload]));
      });
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    for (;;) {
      if (!this.head) {
        const nl = this.buf.indexOf(10);
        if (nl < 0) {
          if (this.buf.length > MAX_HEADER_BYTES) this.fail(new SandboxError("guest_crashed", "the guest agent sent a malformed answer"));
          return;
        }
        const fields = this.buf.subarray(0, nl).toString("latin1").trim().split(" ");
        this.buf = this.buf.subarray(nl + 1);
        const n = TRAILING_BLOBS[fields[0]] ?? 0;
        const lens = n ? fields.slice(-n).map(Number) : [];
        if (lens.some((l) => !Number.isSafeInteger(l) || l < 0)) {
          this.fail(new SandboxError("guest_crashed", `the guest agent sent a malformed header: ${fields.join(" ").slice(0, 80)}`));
          return;
        }
        this.head = { fields, lens };
      }
      const need = this.head.lens.reduce((a, b) => a + b, 0);
      if (this.buf.length < need) return;
      let off = 0;
      const blobs = this.head.lens.map((l) => Buffer.from(this.buf.subarray(off, (off += l))));
      this.buf = this.buf.subarray(need);
      const { fields } = this.head;
      this.head = undefined;
      this.dispatch(fields, blobs);
    }
  }

  private dispatch(fields: string[], blobs: Buffer[]): void {
    if (fields[0] === "H") return this.markReady();
    const w = this.waiter;
    if (!w || w.id !== fields[1]) return; // an answer to a request that already timed out
    if (fields[0] === "O") return w.onChunk?.(fields[2], blobs[0]);
    this.waiter = undefined;
    w.resolve({ fields, blobs });
  }
}
