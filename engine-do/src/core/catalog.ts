// The catalog: workers, functions, trigger types and trigger bindings. SQLite is the truth (it
// survives hibernation, eviction and restarts); the maps here are caches loaded on wake and
// written through on every change.
import { OPEN_GRANT, grantSchema, type Grant, type HttpInvocation } from "@iii-edge/protocol";
import type { Sql, SqlValue } from "./ports.ts";

export type FunctionKind = "worker" | "http" | "edge";
export interface FunctionRecord {
  id: string;
  kind: FunctionKind;
  /** worker_id for `worker`/`http`, binding name for `edge`. */
  owner: string;
  description?: string;
  request_format?: unknown;
  response_format?: unknown;
  metadata?: Record<string, unknown>;
  invocation?: HttpInvocation;
}

export interface TriggerTypeRecord {
  id: string;
  /** worker_id of the providing connection. */
  owner: string;
  description?: string;
  trigger_request_format?: unknown;
  call_request_format?: unknown;
}

export type TriggerStatus = "active" | "parked";
export interface TriggerRecord {
  id: string;
  trigger_type: string;
  function_id: string;
  config: unknown;
  metadata?: unknown;
  /** worker_id, `edge:<binding>`, or null for bindings made with engine::register_trigger. */
  owner: string | null;
  /** Who made it (the grant's `sub`): owns an engine-held (owner null) binding. */
  principal?: string;
  /**
   * An engine-held binding only: false when it ends as its maker's last connection to the namespace
   * ends (its grant had no `durable_bindings`). Absent: it stays until removed (trusted makers, and
   * rows stored before makers were tracked).
   */
  durable?: boolean;
  status: TriggerStatus;
}

export interface WorkerRecord {
  worker_id: string;
  token: string;
  connected_at: number;
  info: Record<string, unknown>;
  /** What the connection may do (from its token); absent on rows older than auth (they ran open). */
  grant?: Grant;
  /** The client's address as the front door saw it, for the per-IP connection bound. */
  ip?: string;
}

const enc = (v: unknown): SqlValue => (v === undefined ? null : JSON.stringify(v));
function dec<T>(v: SqlValue | undefined): T | undefined {
  return typeof v === "string" ? (JSON.parse(v) as T) : undefined;
}
const str = (v: SqlValue | undefined): string | undefined => (typeof v === "string" ? v : undefined);

/** What an owner holds, by kind. */
export type HoldingKind = "functions" | "triggers" | "triggerTypes";
type Held = Record<HoldingKind, number>;

/**
 * How many functions, trigger types and bindings each owner (worker id, edge host) and each
 * principal (a token's `sub`) holds, kept up to date on every put and delete, so a quota check is
 * O(1) however large the catalog is. A record counts for its owner; an owner's records count for the
 * owner's principal; an engine-held binding (owner null) counts for the principal that made it.
 */
class Holdings {
  private readonly byOwner = new Map<string, Held>();
  private readonly principals = new Map<string, string>();
  private readonly byPrincipal = new Map<string, number>();

  count(owner: string | null, kind: HoldingKind, delta: 1 | -1, heldFor?: string): void {
    if (owner === null) {
      if (heldFor !== undefined) this.bump(heldFor, delta);
      return;
    }
    let h = this.byOwner.get(owner);
    if (!h) this.byOwner.set(owner, (h = { functions: 0, triggers: 0, triggerTypes: 0 }));
    h[kind] += delta;
    if (h.functions <= 0 && h.triggers <= 0 && h.triggerTypes <= 0) this.byOwner.delete(owner);
    const p = this.principals.get(owner);
    if (p !== undefined) this.bump(p, delta);
  }
  owned(owner: string, kind?: HoldingKind): number {
    const h = this.byOwner.get(owner);
    if (!h) return 0;
    return kind ? h[kind] : h.functions + h.triggers + h.triggerTypes;
  }
  setPrincipal(owner: string, principal: string | undefined): void {
    const old = this.principals.get(owner);
    if (old === principal) return;
    const n = this.owned(owner);
    if (old !== undefined) this.bump(old, -n);
    if (principal === undefined) this.principals.delete(owner);
    else {
      this.principals.set(owner, principal);
      this.bump(principal, n);
    }
  }
  principalOf(owner: string): string | undefined {
    return this.principals.get(owner);
  }
  ofPrincipal(principal: string): number {
    return this.byPrincipal.get(principal) ?? 0;
  }
  private bump(principal: string, delta: number): void {
    const n = (this.byPrincipal.get(principal) ?? 0) + delta;
    if (n > 0) this.byPrincipal.set(principal, n);
    else this.byPrincipal.delete(principal);
  }
}

export class Catalog {
  readonly functions = new Map<string, FunctionRecord>();
  readonly triggerTypes = new Map<string, TriggerTypeRecord>();
  readonly triggers = new Map<string, TriggerRecord>();
  readonly workers = new Map<string, WorkerRecord>();
  private readonly sql: Sql;
  private readonly holdings = new Holdings();
  /** Bumped by every change of functions or workers: what a listing derived from them (the sorted
   * summaries of introspection.ts) is cached against. */
  private changes = 0;
  get version(): number {
    return this.changes;
  }
  /** Bumped by every change of a trigger binding (stored, removed, parked or woken): what the
   * binding summaries of introspection.ts are cached against. */
  private triggerChanges = 0;
  get triggersVersion(): number {
    return this.triggerChanges;
  }
  /** Told when a binding is stored or removed (the engine's `engine::triggers-available`). */
  onTriggersChanged: () => void = () => {};

  constructor(sql: Sql) {
    this.sql = sql;
    this.load();
  }

  private load(): void {
    for (const r of this.sql.exec("SELECT * FROM functions")) {
      const rec: FunctionRecord = { id: String(r.id), kind: String(r.kind) as FunctionKind, owner: String(r.owner) };
      const description = str(r.description);
      if (description !== undefined) rec.description = description;
      if (r.request_format != null) rec.request_format = dec(r.request_format);
      if (r.response_format != null) rec.response_format = dec(r.response_format);
      if (r.metadata != null) rec.metadata = dec(r.metadata);
      if (r.invocation != null) rec.invocation = dec(r.invocation);
      this.functions.set(rec.id, rec);
      this.holdings.count(rec.owner, "functions", 1);
    }
    for (const r of this.sql.exec("SELECT * FROM trigger_types")) {
      const rec: TriggerTypeRecord = { id: String(r.id), owner: String(r.owner) };
      const description = str(r.description);
      if (description !== undefined) rec.description = description;
      if (r.trigger_request_format != null) rec.trigger_request_format = dec(r.trigger_request_format);
      if (r.call_request_format != null) rec.call_request_format = dec(r.call_request_format);
      this.triggerTypes.set(rec.id, rec);
      this.holdings.count(rec.owner, "triggerTypes", 1);
    }
    for (const r of this.sql.exec("SELECT * FROM triggers")) {
      const rec: TriggerRecord = {
        id: String(r.id),
        trigger_type: String(r.trigger_type),
        function_id: String(r.function_id),
        config: dec(r.config) ?? null,
        owner: str(r.owner) ?? null,
        status: r.status === "active" ? "active" : "parked",
      };
      if (r.metadata != null) rec.metadata = dec(r.metadata);
      const principal = str(r.principal);
      if (principal !== undefined) rec.principal = principal;
      if (r.durable === 0) rec.durable = false;
      this.triggers.set(rec.id, rec);
      this.holdings.count(rec.owner, "triggers", 1, rec.principal);
    }
    for (const r of this.sql.exec("SELECT * FROM workers")) {
      const w: WorkerRecord = {
        worker_id: String(r.worker_id),
        token: String(r.token),
        connected_at: Number(r.connected_at),
        info: dec<Record<string, unknown>>(r.info) ?? {},
      };
      // A grant read back is validated before it is trusted; a bad one grants nothing.
      if (r.grant_json != null)
        w.grant = grantSchema.safeParse(dec(r.grant_json)).data ?? { sub: "invalid", ns: [], call: [], register: [], bind: [] };
      const ip = str(r.ip);
      if (ip !== undefined) w.ip = ip;
      this.workers.set(w.worker_id, w);
      this.holdings.setPrincipal(w.worker_id, (w.grant ?? OPEN_GRANT).sub);
    }
  }

  transaction<T>(fn: () => T): T {
    return this.sql.transaction(fn);
  }

  putWorker(w: WorkerRecord): void {
    this.changes++;
    this.workers.set(w.worker_id, w);
    this.sql.exec(
      "INSERT OR REPLACE INTO workers (worker_id, token, connected_at, info, grant_json, ip) VALUES (?, ?, ?, ?, ?, ?)",
      w.worker_id,
      w.token,
      w.connected_at,
      JSON.stringify(w.info),
      enc(w.grant),
      w.ip ?? null,
    );
    // A connection's registrations count for its grant's principal (as the engine's grantOf reads it).
    this.holdings.setPrincipal(w.worker_id, (w.grant ?? OPEN_GRANT).sub);
  }
  deleteWorker(workerId: string): void {
    this.changes++;
    this.workers.delete(workerId);
    this.sql.exec("DELETE FROM workers WHERE worker_id = ?", workerId);
    this.holdings.setPrincipal(workerId, undefined);
  }

  // Each put writes SQLite first: a row SQLite refuses changes neither the cache nor the counts.
  putFunction(f: FunctionRecord): void {
    this.changes++;
    this.sql.exec(
      "INSERT OR REPLACE INTO functions (id, kind, owner, description, request_format, response_format, metadata, invocation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      f.id,
      f.kind,
      f.owner,
      f.description ?? null,
      enc(f.request_format),
      enc(f.response_format),
      enc(f.metadata),
      enc(f.invocation),
    );
    const prev = this.functions.get(f.id);
    if (prev) this.holdings.count(prev.owner, "functions", -1);
    this.functions.set(f.id, f);
    this.holdings.count(f.owner, "functions", 1);
  }
  /** Remove a function only if `owner` still owns it (the reconnect race, protocol/README.md §2.5). */
  deleteFunction(id: string, owner: string): boolean {
    const f = this.functions.get(id);
    if (!f || f.owner !== owner) return false;
    this.changes++;
    this.functions.delete(id);
    this.sql.exec("DELETE FROM functions WHERE id = ? AND owner = ?", id, owner);
    this.holdings.count(owner, "functions", -1);
    return true;
  }

  putTriggerType(t: TriggerTypeRecord): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO trigger_types (id, owner, description, trigger_request_format, call_request_format) VALUES (?, ?, ?, ?, ?)",
      t.id,
      t.owner,
      t.description ?? null,
      enc(t.trigger_request_format),
      enc(t.call_request_format),
    );
    const prev = this.triggerTypes.get(t.id);
    if (prev) this.holdings.count(prev.owner, "triggerTypes", -1);
    this.triggerTypes.set(t.id, t);
    this.holdings.count(t.owner, "triggerTypes", 1);
  }
  deleteTriggerType(id: string, owner: string): boolean {
    const t = this.triggerTypes.get(id);
    if (!t || t.owner !== owner) return false;
    this.triggerTypes.delete(id);
    this.sql.exec("DELETE FROM trigger_types WHERE id = ? AND owner = ?", id, owner);
    this.holdings.count(owner, "triggerTypes", -1);
    return true;
  }

  putTrigger(t: TriggerRecord): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO triggers (id, trigger_type, function_id, config, metadata, owner, status, principal, durable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      t.id,
      t.trigger_type,
      t.function_id,
      enc(t.config ?? null),
      enc(t.metadata),
      t.owner,
      t.status,
      t.principal ?? null,
      t.durable === false ? 0 : null,
    );
    const prev = this.triggers.get(t.id);
    if (prev) this.holdings.count(prev.owner, "triggers", -1, prev.principal);
    this.triggers.set(t.id, t);
    this.holdings.count(t.owner, "triggers", 1, t.principal);
    this.triggerChanges++;
    this.onTriggersChanged();
  }
  setTriggerStatus(id: string, status: TriggerStatus): void {
    const t = this.triggers.get(id);
    if (!t || t.status === status) return;
    t.status = status;
    this.sql.exec("UPDATE triggers SET status = ? WHERE id = ?", status, id);
    this.triggerChanges++;
  }
  deleteTrigger(id: string): TriggerRecord | undefined {
    const t = this.triggers.get(id);
    if (!t) return undefined;
    this.triggers.delete(id);
    this.sql.exec("DELETE FROM triggers WHERE id = ?", id);
    this.holdings.count(t.owner, "triggers", -1, t.principal);
    this.triggerChanges++;
    this.onTriggersChanged();
    return t;
  }

  triggersOfType(type: string): TriggerRecord[] {
    const out: TriggerRecord[] = [];
    for (const t of this.triggers.values()) if (t.trigger_type === type) out.push(t);
    return out;
  }
  /** Functions, bindings and trigger types `owner` holds (or those of one kind); O(1). Records are
   * replaced through the put/delete methods above, never edited in place, or the counts drift. */
  countOwnedBy(owner: string, kind?: HoldingKind): number {
    return this.holdings.owned(owner, kind);
  }
  /**
   * Whose `owner`'s registrations are (a token's `sub`), for countByPrincipal; undefined: nobody's.
   * Workers are set from their grant by putWorker and on wake, and cleared by deleteWorker, so only
   * owners without a worker row (edge hosts) would need a call.
   */
  setPrincipalOf(owner: string, principal: string | undefined): void {
    this.holdings.setPrincipal(owner, principal);
  }
  principalOf(owner: string): string | undefined {
    return this.holdings.principalOf(owner);
  }
  /** Registrations a principal holds: its owners' (live connections') plus its engine-held bindings; O(1). */
  countByPrincipal(principal: string): number {
    return this.holdings.ofPrincipal(principal);
  }
}
