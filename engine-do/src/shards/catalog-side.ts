// The catalog object's side of connection sharding: every worker socket held by one of the
// namespace's connection shards is a `Conn` of the unchanged core here, so registrations, ownership,
// grants, quotas, routing, deadlines and cleanup are the core's own rules, in one place. A frame the
// worker sends arrives in a batch from its shard (`frames`); a frame the core sends it leaves in a
// batch to that shard (`ShardLink`). Which shard holds which worker is in SQLite (`shard_conns`), so
// an evicted catalog object wakes knowing its remote connections, and asks their shards which of
// them still exist.
import {
  MAX_FRAME_BYTES,
  byteSize,
  shardAttachRequest,
  shardUpBatch,
  type EngineFrame,
  type ShardAttachOutcome,
  type ShardBatchOutcome,
  type ShardDownBatch,
  type ShardRoute,
} from "@iii-edge/protocol";
import type { EngineCore } from "../core/engine.ts";
import type { Conn, Log, Sql } from "../core/ports.ts";
import { BatchSender } from "./batch-sender.ts";
import { shardName, shardOf } from "./config.ts";

/** What the catalog calls on a shard (the Engine object's RPC methods, engine-object.ts). */
export interface ShardPeer {
  shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome>;
  shardAlive(workerIds: string[]): Promise<ShardBatchOutcome>;
}

type DownItem = ShardDownBatch["items"][number];

/** How long a waking catalog waits for its shards to say which sockets they still hold: a shard
 * answers in ~1 ms; one that does not answer within this keeps its workers until a delivery fails. */
const PROBE_TIMEOUT_MS = 2_000;

/** A WebSocket close reason is at most 123 bytes; the core's reasons are short ASCII sentences. */
const MAX_CLOSE_REASON_CHARS = 120;

/** A worker socket on a shard, as the core sees it. */
class ShardConn implements Conn {
  readonly workerId: string;
  readonly shard: string;
  /** While the shard waits for `attach` to answer, frames are handed back in its answer. */
  held: string[] | null = null;
  private readonly link: ShardLink;
  constructor(workerId: string, shard: string, link: ShardLink) {
    this.workerId = workerId;
    this.shard = shard;
    this.link = link;
  }
  send(frame: EngineFrame): boolean | "too_large" {
    let text: string;
    try {
      text = JSON.stringify(frame);
    } catch {
      return false;
    }
    if (byteSize(text) > MAX_FRAME_BYTES) return "too_large";
    if (this.held) {
      this.held.push(text);
      return true;
    }
    return this.link.sender.push({ w: this.workerId, f: text });
  }
  close(code: number, reason: string): void {
    this.link.sender.push({ w: this.workerId, close: { code, reason: reason.slice(0, MAX_CLOSE_REASON_CHARS) } }, true);
  }
}

/** Catalog → one shard: batches of frames and close orders; a worker the shard no longer holds is
 * disconnected here (its calls end with `invocation_stopped`, its registrations go). */
class ShardLink {
  readonly sender: BatchSender<DownItem>;
  private peer: ShardPeer | undefined;
  constructor(shard: string, owner: CatalogShards) {
    this.sender = new BatchSender<DownItem>(
      async (items) => {
        try {
          this.peer ??= owner.peer(shard);
          const out = await this.peer.shardDeliver({ items });
          for (const w of out.gone) owner.drop(w);
        } catch (e) {
          // A broken stub stays broken (DO stubs): the next batch gets a new one. What this batch
          // carried is lost, so its workers are disconnected rather than left waiting.
          this.peer = undefined;
          owner.log.warn("connection shard unreachable; its workers in this batch are disconnected", { shard, error: String(e) });
          for (const w of new Set(items.map((i) => i.w))) owner.drop(w);
        }
      },
      (i) => ("f" in i ? i.f.length : 0),
    );
  }
}

export interface CatalogShardsOptions {
  core: EngineCore;
  sql: Sql;
  /** How many shards the namespace has (CONNECTION_SHARDS). */
  shards: number;
  peer(shard: string): ShardPeer;
  limits: { perPrincipal?: number; perIp?: number };
}

export class CatalogShards {
  readonly log: Log;
  private readonly opts: CatalogShardsOptions;
  private readonly conns = new Map<string, ShardConn>();
  private readonly links = new Map<string, ShardLink>();

  constructor(opts: CatalogShardsOptions) {
    this.opts = opts;
    this.log = opts.core.ports.log;
  }

  peer(shard: string): ShardPeer {
    return this.opts.peer(shard);
  }

  private link(shard: string): ShardLink {
    let l = this.links.get(shard);
    if (!l) this.links.set(shard, (l = new ShardLink(shard, this)));
    return l;
  }

  /** Is `name` one of this namespace's shards? (A batch or attach from anything else is refused.) */
  private isOurShard(name: string): boolean {
    const s = shardOf(name);
    return !!s && s.namespace === this.opts.core.ports.namespace && s.index < this.opts.shards;
  }

  /** On wake, before core.start: the remote connections the core must count as live. */
  restore(): Conn[] {
    const out: Conn[] = [];
    for (const r of this.opts.sql.exec<{ worker_id: string; shard: string }>("SELECT worker_id, shard FROM shard_conns")) {
      const c = new ShardConn(r.worker_id, r.shard, this.link(r.shard));
      this.conns.set(r.worker_id, c);
      out.push(c);
    }
    return out;
  }

  /** After a wake: a shard restarted meanwhile (a deploy) lost its sockets without telling anyone;
   * each shard says which of the restored workers it no longer holds, and they are cleaned up. The
   * wake waits for this (bounded by PROBE_TIMEOUT_MS), so no ghost keeps an id from its successor. */
  async probe(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((r) => (timer = setTimeout(r, PROBE_TIMEOUT_MS)));
    await Promise.race([this.probeAll(), late]);
    if (timer !== undefined) clearTimeout(timer);
  }

  private async probeAll(): Promise<void> {
    const byShard = new Map<string, string[]>();
    for (const c of this.conns.values()) (byShard.get(c.shard) ?? byShard.set(c.shard, []).get(c.shard)!).push(c.workerId);
    await Promise.all(
      [...byShard].map(async ([shard, ids]) => {
        try {
          const out = await this.opts.peer(shard).shardAlive(ids);
          for (const w of out.gone) this.drop(w);
        } catch (e) {
          // Unreachable now: its workers stay until a delivery to them fails.
          this.log.warn("connection shard did not answer the wake probe", { shard, error: String(e) });
        }
      }),
    );
  }

  /** A shard asks to admit a new socket: the same connection bounds as a socket on this object. */
  attach(sent: unknown): ShardAttachOutcome {
    const parsed = shardAttachRequest.safeParse(sent);
    if (!parsed.success || !this.isOurShard(parsed.data.shard))
      return { ok: false, error: { code: "invalid_frame", message: "not a connection shard of this namespace" } };
    const { shard, worker_id, grant, ip } = parsed.data;
    const full = this.opts.core.admitConnection(grant, ip, this.opts.limits);
    if (full) return { ok: false, error: full };
    const conn = new ShardConn(worker_id, shard, this.link(shard));
    conn.held = [];
    this.conns.set(worker_id, conn);
    this.opts.sql.exec("INSERT OR REPLACE INTO shard_conns (worker_id, shard) VALUES (?, ?)", worker_id, shard);
    this.opts.core.connect(conn, this.opts.core.ports.newId(), ip ? { grant, ip } : { grant });
    const frames = conn.held;
    conn.held = null;
    return { ok: true, frames };
  }

  /** Frames (and closes) from a shard's sockets, in the order they were sent. */
  frames(sent: unknown): ShardBatchOutcome {
    const parsed = shardUpBatch.safeParse(sent);
    if (!parsed.success || !this.isOurShard(parsed.data.shard)) {
      this.log.warn("malformed batch from a connection shard dropped", {
        error: parsed.success ? "not a shard of this namespace" : parsed.error.issues[0]?.message,
      });
      return { gone: [] };
    }
    const gone: string[] = [];
    for (const item of parsed.data.items) {
      const conn = this.conns.get(item.w);
      if ("closed" in item) {
        if (conn?.shard === parsed.data.shard) this.drop(item.w);
        continue;
      }
      // (A connection the core already let go, e.g. replaced by a reattach, is not heard any more.)
      if (!conn || conn.shard !== parsed.data.shard || !this.opts.core.isConnected(item.w)) {
        gone.push(item.w);
        continue;
      }
      try {
        this.opts.core.message(conn, item.f);
      } catch (e) {
        // One frame must not fail the batch: the shard would take that for an unreachable catalog.
        this.log.warn("frame from a connection shard failed", { shard: parsed.data.shard, error: String(e) });
      }
    }
    return { gone };
  }

  /** A remote connection ended: forget it, and let the core clean up after it. */
  drop(workerId: string): void {
    if (!this.conns.delete(workerId)) return;
    this.opts.sql.exec("DELETE FROM shard_conns WHERE worker_id = ?", workerId);
    this.opts.core.disconnect(workerId);
  }

  /** Where a function's worker is, for a shard's direct calls (direct-calls.ts): only a function a
   * live worker on one of this namespace's shards holds; anything else goes through here. */
  route(functionId: unknown): ShardRoute {
    if (typeof functionId !== "string") return null;
    const fn = this.opts.core.catalog.functions.get(functionId);
    if (fn?.kind !== "worker" || this.opts.core.builtins.has(functionId)) return null;
    // A function told who calls it gets the caller's principal stamped here, from the grant.
    if (fn.metadata?.caller_principal === true) return null;
    const conn = this.conns.get(fn.owner);
    return conn && this.opts.core.isConnected(fn.owner) ? { shard: conn.shard, worker_id: fn.owner } : null;
  }

  /** Live worker connections per shard (for /healthz). */
  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (let k = 0; k < this.opts.shards; k++) out[shardName(this.opts.core.ports.namespace, k)] = 0;
    for (const c of this.conns.values()) out[c.shard] = (out[c.shard] ?? 0) + 1;
    return out;
  }
}
