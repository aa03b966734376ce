// One small Durable Object per principal (token `sub`): its live connections in every namespace,
// so MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES holds however many namespaces a token may use
// (each namespace is its own Engine object and counts only its own sockets). An Engine object
// reserves a slot before it answers an upgrade and releases it when the socket closes.
//
// A slot is a lease on a socket of a named Engine object. An object that restarts (a deploy, a
// crash) loses its sockets without a close event, so it never releases them: when a reservation
// would be refused, the holders are first checked with the objects that hold them
// (`Engine.liveConnections`) and the gone ones are dropped. That costs nothing below the cap and one
// RPC per holding object at it, at most once per PROBE_INTERVAL_MS.
import { DurableObject } from "cloudflare:workers";
import { migrate, PRINCIPAL_CONNECTIONS_MIGRATIONS } from "./core/schema.ts";

/** A refused reservation re-checks the holders at most this often: a client hammering a full quota
 * must not turn every attempt into RPCs to every namespace it holds sockets in. */
const PROBE_INTERVAL_MS = 5_000;

export interface ConnectionLease {
  /** The socket's id (a worker id or a stream socket id), unique within its object. */
  id: string;
  /** The Engine object (namespace) holding it. */
  object: string;
}
export type ReserveOutcome = { ok: true } | { ok: false; held: number };

export class PrincipalConnections extends DurableObject<Env> {
  private probedAt = -Infinity;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(
      { exec: (q, ...b) => ctx.storage.sql.exec(q, ...b).toArray() as never, transaction: (fn) => ctx.storage.transactionSync(fn) },
      PRINCIPAL_CONNECTIONS_MIGRATIONS,
    );
  }

  private held(): number {
    return Number(this.ctx.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM leases").one().n);
  }

  /** Take a slot for `lease` if fewer than `limit` are held (taking one twice is a no-op). */
  async reserve(lease: ConnectionLease, limit: number): Promise<ReserveOutcome> {
    const sql = this.ctx.storage.sql;
    if (sql.exec("SELECT 1 FROM leases WHERE object = ? AND id = ?", lease.object, lease.id).toArray().length > 0) return { ok: true };
    if (this.held() >= limit && Date.now() - this.probedAt >= PROBE_INTERVAL_MS) {
      this.probedAt = Date.now();
      await this.dropGone();
    }
    const held = this.held();
    if (held >= limit) return { ok: false, held };
    sql.exec("INSERT OR IGNORE INTO leases (object, id, since) VALUES (?, ?, ?)", lease.object, lease.id, Date.now());
    return { ok: true };
  }

  async release(lease: ConnectionLease): Promise<void> {
    this.ctx.storage.sql.exec("DELETE FROM leases WHERE object = ? AND id = ?", lease.object, lease.id);
  }

  /** How many slots are held (tests and operators). */
  async count(): Promise<number> {
    return this.held();
  }

  /** Ask every object that holds leases which of them it still holds; drop the rest. An object that
   * cannot be asked keeps its leases (they are checked again at the next refusal). */
  private async dropGone(): Promise<void> {
    const byObject = new Map<string, string[]>();
    for (const r of this.ctx.storage.sql.exec<{ object: string; id: string }>("SELECT object, id FROM leases")) {
      const ids = byObject.get(r.object) ?? [];
      ids.push(r.id);
      byObject.set(r.object, ids);
    }
    await Promise.all(
      [...byObject].map(async ([object, ids]) => {
        let live: Set<string>;
        try {
          live = new Set(await this.env.ENGINE.getByName(object).liveConnections(ids));
        } catch {
          return;
        }
        for (const id of ids) if (!live.has(id)) this.ctx.storage.sql.exec("DELETE FROM leases WHERE object = ? AND id = ?", object, id);
      }),
    );
  }
}
