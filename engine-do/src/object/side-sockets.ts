// The sockets of an Engine object that are not worker connections: channel ends, stream sockets and
// telemetry sockets. What each is (read from its attachment once, not once per frame), its frame/byte
// budget (a worker connection's is kept by the core, core/admission.ts) and whose shared budget it
// spends too. One lookup per frame: in a flood most frames are dropped right after it.
import { FLOOD_CLOSE_CODE, isReservedSub } from "@iii-edge/protocol";
import type { ChannelSockets } from "../channel-sockets.ts";
import type { Log } from "../core/ports.ts";
import { PrincipalBudgets } from "../core/principal-budgets.ts";
import {
  CHANNEL_FRAMES,
  CONTROL_FRAMES,
  STREAM_SOCKET_FRAMES,
  SocketBudget,
  floodCloseReason,
  type FrameLimits,
} from "../core/socket-budget.ts";
import type { StreamSockets } from "../stream-sockets.ts";

/** A side socket's frame budget, by the kind in its attachment (telemetry: a worker's). */
const sideFrames = (kind: string): FrameLimits =>
  kind === "channel" ? CHANNEL_FRAMES : kind === "stream" ? STREAM_SOCKET_FRAMES : CONTROL_FRAMES;

/** A socket that is not a worker connection, as the object keeps it between its frames. */
interface SideSocket {
  kind: string;
  budget: SocketBudget;
  /** Whose shared budget it spends: undefined until its first frame asks, null for nobody's. */
  principal: string | null | undefined;
}

export interface SideSocketsOptions {
  channels: ChannelSockets;
  streams: StreamSockets;
  /** Telemetry frames (§11), stored and exported by the core. */
  ingest(frame: ArrayBuffer): void;
  log: Log;
}

export class SideSockets {
  private readonly sides = new WeakMap<WebSocket, SideSocket>();
  /** What all the channel writers of one principal (the channels' creator) may send together
   * (core/principal-budgets.ts). */
  private readonly sharedBudgets: Record<string, PrincipalBudgets | undefined> = { channel: new PrincipalBudgets(CHANNEL_FRAMES) };
  private readonly opts: SideSocketsOptions;

  constructor(opts: SideSocketsOptions) {
    this.opts = opts;
  }

  /** The socket's entry once one of its frames was seen (undefined: not known as a side socket yet). */
  known(ws: WebSocket): SideSocket | undefined {
    return this.sides.get(ws);
  }

  /** A frame of a side socket (`side`: what known() gave, if anything). */
  message(ws: WebSocket, message: string | ArrayBuffer, known?: SideSocket): void {
    const side = known ?? this.sideOf(ws);
    // A socket closed for flooding: what the runtime still delivers is dropped unseen.
    if (side.budget.closed) return;
    // The budget before anything looks at the frame.
    if (!this.admit(ws, side, message)) return;
    if (side.kind === "channel") this.opts.channels.message(ws, message);
    else if (side.kind === "stream") this.opts.streams.message(ws, message);
    // Telemetry (§11): binary frames are stored and exported (core/telemetry); text frames ignored.
    else if (side.kind === "otel" && typeof message !== "string") this.opts.ingest(message);
    // Else a refused channel end.
  }

  /** A side socket closed or errored. */
  closed(ws: WebSocket): void {
    if (!this.opts.channels.closed(ws)) this.opts.streams.closed(ws);
  }

  private sideOf(ws: WebSocket): SideSocket {
    const a = ws.deserializeAttachment() as { kind?: unknown } | null;
    const kind = typeof a?.kind === "string" ? a.kind : "none";
    const side: SideSocket = { kind, budget: new SocketBudget(Date.now(), sideFrames(kind)), principal: undefined };
    this.sides.set(ws, side);
    return side;
  }

  /** A side socket's budget (socket-budget.ts): over it, frames are dropped (these protocols have no
   * error frame to warn with), and a socket still over it FLOOD_GRACE_MS later is closed. A channel
   * is a byte stream, where a dropped chunk would corrupt what the reader gets: its end is closed at
   * the first frame over budget instead. */
  private admit(ws: WebSocket, side: SideSocket, message: string | ArrayBuffer): boolean {
    const now = Date.now();
    const { kind, budget } = side;
    const size = typeof message === "string" ? message.length : message.byteLength;
    let verdict = budget.admit(size, now);
    const shared = this.sharedBudgets[kind];
    // Within its own budget but not its principal's: as if over its own.
    if (verdict === "admit" && shared && !shared.take(this.principalOf(ws, side), size, now)) verdict = budget.over(now);
    if (verdict === "admit") return true;
    if (verdict === "close" || kind === "channel") {
      budget.closed = true;
      this.closeFlooder(ws, kind, budget);
    } else if (verdict === "warn") {
      const leftOut = budget.log(now);
      if (leftOut !== undefined)
        this.opts.log.warn("socket over budget; frames dropped", {
          kind,
          dropped: budget.dropped,
          ...(leftOut > 0 ? { lines_left_out: leftOut } : {}),
        });
    }
    return false;
  }

  /** Whose shared budget the socket spends (null: none), found on its first frame. */
  private principalOf(ws: WebSocket, side: SideSocket): string | undefined {
    if (side.principal === undefined) {
      const who = side.kind === "channel" ? this.opts.channels.ownerOf(ws) : undefined;
      // The open grant (an engine without auth) is every local client: nobody in particular.
      side.principal = typeof who === "string" && !isReservedSub(who) ? who : null;
    }
    return side.principal ?? undefined;
  }

  private closeFlooder(ws: WebSocket, kind: string, budget: SocketBudget): void {
    this.opts.log.warn("socket closed for flooding", { kind, dropped: budget.dropped });
    const reason = floodCloseReason(sideFrames(kind));
    // (The attachment is read before the close: a closed socket no longer has one.)
    const end = kind === "channel" ? this.opts.channels.endOf(ws) : undefined;
    try {
      ws.close(FLOOD_CLOSE_CODE, reason);
    } catch {
      // already closed
    }
    // The reader of a cut channel learns it was cut: the writer's close event alone would end the
    // stream as complete.
    if (end?.dir === "write") this.opts.channels.close(end.channel_id, "read", FLOOD_CLOSE_CODE, reason);
  }
}
