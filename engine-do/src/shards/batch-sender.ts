// One direction of the link between a catalog object and one of its connection shards: items are
// queued and sent in batches by DO RPC, one batch in flight at a time, so the order a socket's
// frames were sent in is the order they arrive in (and a busy link sends fewer, larger batches
// instead of one RPC per frame). Bounded: past the backlog bounds, push refuses.
import { MAX_SHARD_BATCH_ITEMS } from "@iii-edge/protocol";

/** Items waiting on one link: one second of one worker's frame budget (10,000 frames/s). More than
 * that waiting means the other end has not kept up for a second; refusing is the honest answer. */
export const MAX_BACKLOG_ITEMS = 10_000;
/** Bytes (characters, for text) waiting on one link: 32 one-MiB frames, the most a DO keeps for one
 * socket's messages in flight; bounds the memory a stalled peer can pin. */
export const MAX_BACKLOG_BYTES = 32 * 1024 * 1024;
/** Bytes one batch carries, well under the 32 MiB a Workers RPC message may serialize to; one frame
 * (at most MAX_FRAME_BYTES = 1 MiB) always fits. */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

export class BatchSender<T> {
  private queue: T[] = [];
  private sizes: number[] = [];
  private bytes = 0;
  private busy = false;
  private readonly send: (items: T[]) => Promise<void>;
  private readonly sizeOf: (item: T) => number;

  /** `send` must not throw: it handles its own failures (the link's owner knows what they mean). */
  constructor(send: (items: T[]) => Promise<void>, sizeOf: (item: T) => number) {
    this.send = send;
    this.sizeOf = sizeOf;
  }

  /** Queue one item; false (nothing queued) when the backlog is full. `control` items (a socket
   * closed, close a socket: at most one per socket) are queued even then, so the other end always
   * learns what became of a socket. */
  push(item: T, control = false): boolean {
    const size = this.sizeOf(item);
    if (!control && (this.queue.length >= MAX_BACKLOG_ITEMS || this.bytes + size > MAX_BACKLOG_BYTES)) return false;
    this.queue.push(item);
    this.sizes.push(size);
    this.bytes += size;
    // Sent after the current event's synchronous work: what one event produces goes in one batch.
    if (!this.busy) {
      this.busy = true;
      queueMicrotask(() => this.flush());
    }
    return true;
  }

  get backlog(): number {
    return this.queue.length;
  }

  private flush(): void {
    if (this.queue.length === 0) {
      this.busy = false;
      return;
    }
    let n = 0;
    let bytes = 0;
    while (n < this.queue.length && n < MAX_SHARD_BATCH_ITEMS && (n === 0 || bytes + this.sizes[n]! <= MAX_BATCH_BYTES))
      bytes += this.sizes[n++]!;
    const batch = this.queue.splice(0, n);
    this.sizes.splice(0, n);
    this.bytes -= bytes;
    this.busy = true;
    this.send(batch).then(
      () => this.flush(),
      () => this.flush(),
    );
  }
}

/** The size a BatchSender counts for a frame: characters of text, bytes of binary. */
export const frameSize = (f: string | ArrayBuffer): number => (typeof f === "string" ? f.length : f.byteLength);
