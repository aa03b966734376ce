// What the engine lets in from its worker connections: how many connections one principal and one
// client address may hold (MAX_CONNECTIONS_PER_*, checked before an upgrade is answered), and each
// connection's frame and byte budget (socket-budget.ts), checked before a frame is decoded or
// parsed. Refused frames are answered and logged within that budget too, so a flood turns into
// neither a flood of replies nor one of log lines.
import {
  BYTES_PER_SECOND,
  FLOOD_CLOSE_CODE,
  FRAMES_PER_SECOND,
  OPEN_GRANT,
  isReservedSub,
  peekCallIds,
  type ErrorBody,
  type Grant,
} from "@iii-edge/protocol";
import { MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_PRINCIPAL } from "./bounds.ts";
import type { WorkerRecord } from "./catalog.ts";
import type { Conn, EnginePorts } from "./ports.ts";
import { PrincipalRefusals } from "./principal-budgets.ts";
import { ERROR_NOTICES_PER_SECOND, FLOOD_CLOSE_REASON, SocketBudget } from "./socket-budget.ts";

/** A loopback client address (IPv4 127/8, ::1, IPv4-mapped 127/8). Locally every client shares one,
 * so the per-address bound is for real ones; the front door's open mode admits only these. */
export const isLoopbackAddress = (ip: string): boolean =>
  /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/.test(ip);

export class AdmissionControl {
  private readonly ports: EnginePorts;
  /** The catalog's workers: whose grant and address each connection counts against. */
  private readonly workers: ReadonlyMap<string, WorkerRecord>;
  /** Live connections per principal and per client address, for MAX_CONNECTIONS_PER_*. */
  private readonly connsByPrincipal = new Map<string, number>();
  private readonly connsByIp = new Map<string, number>();
  private readonly counted = new Set<string>();
  /** Each connection's frame/byte budget (socket-budget.ts), by worker id. */
  private readonly buckets = new Map<string, SocketBudget>();
  /** And the refused frames all of one principal's connections may send together (principal-budgets.ts). */
  private readonly principals = new PrincipalRefusals();

  constructor(ports: EnginePorts, workers: ReadonlyMap<string, WorkerRecord>) {
    this.ports = ports;
    this.workers = workers;
  }

  // ---------------------------------------------------------------- connections

  /**
   * May one more connection of `grant` from `ip` be accepted? (Checked before the upgrade is
   * answered.) The open grant of a loopback engine is nobody in particular: only the per-address
   * bound applies to it.
   */
  admitConnection(grant: Grant, ip: string | undefined, limits: { perPrincipal?: number; perIp?: number } = {}): ErrorBody | undefined {
    const perPrincipal = limits.perPrincipal ?? MAX_CONNECTIONS_PER_PRINCIPAL;
    const perIp = limits.perIp ?? MAX_CONNECTIONS_PER_IP;
    if (grant !== OPEN_GRANT && (this.connsByPrincipal.get(grant.sub) ?? 0) >= perPrincipal) {
      return { code: "too_many_connections", message: `'${grant.sub}' already holds ${perPrincipal} connections to this namespace` };
    }
    if (ip && !isLoopbackAddress(ip) && (this.connsByIp.get(ip) ?? 0) >= perIp) {
      return { code: "too_many_connections", message: `${perIp} connections from this address are open already` };
    }
    return undefined;
  }

  /** Count a live connection (its worker row must exist); counting one twice is a no-op. */
  connected(workerId: string): void {
    this.countConnection(workerId, +1);
  }

  /** The connection is gone: uncount it and drop its budget. */
  released(workerId: string): void {
    this.countConnection(workerId, -1);
    this.buckets.delete(workerId);
  }

  private countConnection(workerId: string, delta: 1 | -1): void {
    const w = this.workers.get(workerId);
    if (!w || this.counted.has(workerId) === (delta === 1)) return;
    if (delta === 1) this.counted.add(workerId);
    else this.counted.delete(workerId);
    const bump = (m: Map<string, number>, k: string) => {
      const n = (m.get(k) ?? 0) + delta;
      if (n > 0) m.set(k, n);
      else m.delete(k);
    };
    bump(this.connsByPrincipal, (w.grant ?? OPEN_GRANT).sub);
    if (w.ip) bump(this.connsByIp, w.ip);
  }

  // ---------------------------------------------------------------- frames

  /**
   * The connection's frame and byte budget (socket-budget.ts): a flood is dropped, not queued; the
   * sender is told once a second (`rate_limited`), every dropped call is answered, and a connection
   * still over budget FLOOD_GRACE_MS after being told is closed with FLOOD_CLOSE_CODE.
   */
  admit(conn: Conn, raw: string | ArrayBuffer): boolean {
    let b = this.buckets.get(conn.workerId);
    // Closing: what the runtime still delivers is dropped unseen (the socket cannot be answered),
    // before even the clock is read.
    if (b?.closed) return false;
    const now = this.ports.clock.now();
    if (!b) this.buckets.set(conn.workerId, (b = new SocketBudget(now)));
    const size = typeof raw === "string" ? raw.length : raw.byteLength;
    let verdict = b.admit(size, now);
    // Within its own budget but its principal is over its refusals: dropped, told and closed as if
    // over its own.
    if (verdict === "admit" && !this.principals.admits(this.principalOf(conn), now)) verdict = b.over(now);
    if (verdict === "admit") return true;
    if (verdict === "close") {
      this.ports.log.warn("connection closed for flooding", { worker_id: conn.workerId, dropped: b.dropped });
      conn.send({ type: "error", error: { code: "rate_limited", message: `closing the connection: ${FLOOD_CLOSE_REASON}` } });
      conn.close(FLOOD_CLOSE_CODE, FLOOD_CLOSE_REASON);
      return false;
    }
    if (verdict === "warn") {
      this.abuseLog(conn, "rate limited", { dropped: b.dropped });
      conn.send({
        type: "error",
        error: {
          code: "rate_limited",
          message: `more than ${FRAMES_PER_SECOND} frames/s or ${BYTES_PER_SECOND} bytes/s; frames are being dropped`,
        },
      });
    }
    this.answerDropped(conn, raw);
    return false;
  }

  /**
   * A call dropped by the budget still gets its answer (every caller gets one). The frame is not
   * parsed — that would spend the CPU the budget protects — its ids are picked out of the head and
   * tail of the text (peekCallIds), whatever its size.
   */
  private answerDropped(conn: Conn, raw: string | ArrayBuffer): void {
    const call = peekCallIds(raw);
    if (!call) return;
    conn.send({
      type: "invocationresult",
      ...call,
      error: {
        code: "rate_limited",
        message: `over this connection's budget (${FRAMES_PER_SECOND} frames/s, ${BYTES_PER_SECOND} bytes/s); this call was dropped`,
      },
    });
  }

  /** An admitted frame that is ignored (not refused): it costs its budget what a refusal does. */
  ignored(conn: Conn, reason: string): void {
    this.buckets.get(conn.workerId)?.refused();
    this.principals.refused(this.principalOf(conn), this.ports.clock.now());
    this.abuseLog(conn, "ignored frame", { reason });
  }

  /** Refuse a frame: an `error` frame within the socket's notice budget, and (for a call) its
   * `invocationresult` always. */
  refuse(conn: Conn, error: ErrorBody, invocationId?: string, functionId?: string): void {
    this.abuseLog(conn, "refused frame", { ...error });
    const budget = this.buckets.get(conn.workerId);
    budget?.refused();
    this.principals.refused(this.principalOf(conn), this.ports.clock.now());
    // The `error` frame within the socket's notice budget; a call's answer always.
    const notice = budget?.notice(this.ports.clock.now()) ?? "answer";
    if (notice === "answer") conn.send({ type: "error", error });
    else if (notice === "warn")
      conn.send({
        type: "error",
        error: {
          code: "rate_limited",
          message: `more than ${ERROR_NOTICES_PER_SECOND} refused frames/s: refused frames are no longer answered (calls still are)`,
        },
      });
    if (invocationId) conn.send({ type: "invocationresult", invocation_id: invocationId, function_id: functionId ?? "", error });
  }

  /** Whose shared budget a connection's frames also spend: its grant's principal (none for the
   * open grant, which every client of an engine without auth holds). */
  private principalOf(conn: Conn): string | undefined {
    const grant = this.workers.get(conn.workerId)?.grant;
    return grant && !isReservedSub(grant.sub) ? grant.sub : undefined;
  }

  /** A warning about a connection, at most one line per ABUSE_LOG_INTERVAL_MS per connection (the
   * next says how many it left out): a flood must not turn into a flood of log lines. */
  private abuseLog(conn: Conn, msg: string, fields: Record<string, unknown>): void {
    const budget = this.buckets.get(conn.workerId);
    const leftOut = budget ? budget.log(this.ports.clock.now()) : 0;
    if (leftOut === undefined) return;
    this.ports.log.warn(msg, { worker_id: conn.workerId, ...fields, ...(leftOut > 0 ? { lines_left_out: leftOut } : {}) });
  }
}
