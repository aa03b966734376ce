// What one socket may cost the engine object (control, channel and stream sockets alike), checked
// before a frame is decoded or parsed:
// * frames per second (FRAMES_PER_SECOND for worker connections; channel ends and browser stream
//   sockets, whose frames cost the object more, have their own) and BYTES_PER_SECOND, as token
//   buckets with a burst; a socket over them has its frames dropped and is told once a second, and
//   one still over them FLOOD_GRACE_MS after being told is closed (FLOOD_CLOSE_CODE);
// * refused frames get an `error` frame only within a budget of their own, and a misbehaving socket
//   costs at most one log line per ABUSE_LOG_INTERVAL_MS.
// Plain code over a clock value: the core keeps one per worker connection, the shell one per other
// socket. (There is deliberately no object-wide share: it was tried and measured — it shaved little
// off a burst's queue, which is mostly the runtime's own dispatch, and it dropped frames of
// well-behaved sockets, such as every worker replaying its registrations after a deploy.)
import {
  BYTE_BURST,
  BYTES_PER_SECOND,
  CHANNEL_FRAME_BURST,
  CHANNEL_FRAMES_PER_SECOND,
  FLOOD_GRACE_MS,
  FRAME_BURST,
  FRAMES_PER_SECOND,
  STREAM_SOCKET_FRAME_BURST,
  STREAM_SOCKET_FRAMES_PER_SECOND,
} from "@iii-edge/protocol";

/** A kind of socket's frame budget (its byte budget is the same for every kind). */
export interface FrameLimits {
  perSecond: number;
  burst: number;
}
/** Worker connections (and the telemetry socket beside them). */
export const CONTROL_FRAMES: FrameLimits = { perSecond: FRAMES_PER_SECOND, burst: FRAME_BURST };
export const CHANNEL_FRAMES: FrameLimits = { perSecond: CHANNEL_FRAMES_PER_SECOND, burst: CHANNEL_FRAME_BURST };
export const STREAM_SOCKET_FRAMES: FrameLimits = { perSecond: STREAM_SOCKET_FRAMES_PER_SECOND, burst: STREAM_SOCKET_FRAME_BURST };

/** Refused frames (not JSON, invalid, too large, too deep) one socket gets an `error` frame for: a
 * burst of ERROR_NOTICE_BURST, then ERROR_NOTICES_PER_SECOND. A correct client sends none; a buggy
 * one (a version mismatch, say) learns what is wrong from far fewer; past that a junk flood is
 * answered only where a caller waits (its `invocationresult`), so each junk frame costs the object
 * its parse and no reply. */
export const ERROR_NOTICE_BURST = 1_000;
export const ERROR_NOTICES_PER_SECOND = 100;
/** What a refused or ignored frame costs its socket's frame budget, in frames: a frame that is
 * parsed only to be thrown away costs the object a parse (and the first ones a reply) where a pong
 * costs nothing, so a socket sending junk runs out of budget REFUSED_FRAME_COST times sooner and
 * the rest of its flood is dropped unparsed. A worker connection may still send 2 000 junk frames
 * at once and 2 000 a second (FRAME_BURST and FRAMES_PER_SECOND over this). */
export const REFUSED_FRAME_COST = 5;
/** At most one log line per misbehaving socket per this interval (the next one says how many it
 * left out). A line per frame was the costliest part of a junk flood: under `wrangler dev` each
 * console line crosses the inspector proxy, and 60 000 of them took it to 1.1 GB and a minute of CPU. */
export const ABUSE_LOG_INTERVAL_MS = 10_000;

/** What to do with one frame: handle it; drop it quietly; drop it and tell the sender (at most once
 * a WARN_INTERVAL_MS); or drop it and close the socket (it kept flooding after being told). */
export type Admission = "admit" | "drop" | "warn" | "close";

/** How often a socket over budget is told (`rate_limited`) that its frames are being dropped. */
const WARN_INTERVAL_MS = 1_000;
/** An episode over budget ends after this long without a dropped frame (a client that backed off
 * starts with a clean slate the next time it bursts). */
const EPISODE_GAP_MS = 1_000;

/** A token bucket's level after `elapsedMs` of refilling at `perSecond`, capped at `cap`. */
export function refilled(level: number, elapsedMs: number, perSecond: number, cap: number): number {
  return Math.min(cap, level + (Math.max(0, elapsedMs) * perSecond) / 1000);
}

export class SocketBudget {
  private readonly limits: FrameLimits;
  private frames: number;
  private bytes = BYTE_BURST;
  private notices = ERROR_NOTICE_BURST;
  private at: number;
  private noticesAt: number;
  /** Start of the current episode over budget, and its last dropped frame. */
  private overSince = 0;
  private lastDrop = -Infinity;
  private warnedAt = -Infinity;
  private quietWarnedAt = -Infinity;
  private loggedAt = -Infinity;
  private leftOut = 0;
  /** Frames dropped since the socket last went over budget (for the log line). */
  dropped = 0;
  /** Set once the socket is being closed for flooding: every later frame is dropped unseen. */
  closed = false;

  constructor(now: number, limits: FrameLimits = CONTROL_FRAMES) {
    this.limits = limits;
    this.frames = limits.burst;
    this.at = now;
    this.noticesAt = now;
  }

  /** Charge one frame of `size` bytes (UTF-16 units for text: counting UTF-8 would cost an encode
   * per frame). A frame is admitted while both of the socket's buckets have something left; its
   * full size is then taken, so one large frame puts the socket in debt rather than being refused
   * here (it is refused by size later, cheaply). */
  admit(size: number, now: number): Admission {
    if (this.closed) return "drop";
    return this.take(size, now) ? "admit" : this.over(now);
  }

  /** The buckets alone: refill them to `now`, then take the frame if both have something left.
   * (A principal's shared budget, principal-budgets.ts, is only this: it is never closed.) */
  take(size: number, now: number): boolean {
    const dt = Math.max(0, now - this.at);
    this.at = now;
    this.frames = refilled(this.frames, dt, this.limits.perSecond, this.limits.burst);
    this.bytes = refilled(this.bytes, dt, BYTES_PER_SECOND, BYTE_BURST);
    if (this.frames < 1 || this.bytes <= 0) return false;
    this.frames -= 1;
    this.bytes -= size;
    return true;
  }

  /** A frame that was refused or ignored after it was admitted: charge the rest of its cost
   * (REFUSED_FRAME_COST in all). The budget may go into debt; it refills as usual. */
  refused(): void {
    this.frames -= REFUSED_FRAME_COST - 1;
  }

  /** Over the socket's own budget (or its principal's): drop, tell once a second, close after
   * FLOOD_GRACE_MS. */
  over(now: number): Admission {
    if (now - this.lastDrop >= EPISODE_GAP_MS) {
      this.overSince = now;
      this.dropped = 0;
    }
    this.lastDrop = now;
    this.dropped++;
    if (now - this.overSince >= FLOOD_GRACE_MS) {
      this.closed = true;
      return "close";
    }
    if (now - this.warnedAt >= WARN_INTERVAL_MS) {
      this.warnedAt = now;
      return "warn";
    }
    return "drop";
  }

  /** A refused frame: "answer" it with its `error` frame, or past the notice budget stay "quiet",
   * except to "warn" (at most once a WARN_INTERVAL_MS) that refusals are no longer answered. (Its
   * `invocationresult`, if it is a call, is sent regardless: every caller gets an answer.) */
  notice(now: number): "answer" | "warn" | "quiet" {
    this.notices = refilled(this.notices, now - this.noticesAt, ERROR_NOTICES_PER_SECOND, ERROR_NOTICE_BURST);
    this.noticesAt = now;
    if (this.notices >= 1) {
      this.notices -= 1;
      return "answer";
    }
    if (now - this.quietWarnedAt < WARN_INTERVAL_MS) return "quiet";
    this.quietWarnedAt = now;
    return "warn";
  }

  /** May this socket cost a log line now? The number of lines it left out since the last one, or
   * undefined to stay quiet (that line is counted). */
  log(now: number): number | undefined {
    if (now - this.loggedAt < ABUSE_LOG_INTERVAL_MS) {
      this.leftOut++;
      return undefined;
    }
    const n = this.leftOut;
    this.leftOut = 0;
    this.loggedAt = now;
    return n;
  }
}

/** The reason a flooding socket is closed with (a close reason is at most 123 bytes). */
export function floodCloseReason(limits: FrameLimits): string {
  return `flooding: over ${limits.perSecond} frames/s or ${BYTES_PER_SECOND / (1024 * 1024)} MiB/s`;
}
export const FLOOD_CLOSE_REASON = floodCloseReason(CONTROL_FRAMES);
