// The catalog: workers, functions, trigger types and trigger bindings. SQLite is the truth (it
// survives hibernation, eviction and restarts); the maps here are caches loaded on wake and
// written through on every change.
import type { HttpInvocation } from "../../../protocol/src/index.ts";
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
  status: TriggerStatus;
}

export interface WorkerRecord {
  worker_id: string;
  token: string;
  connected_at: number;
  info: Record<string, unknown>;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS workers (
  worker_id TEXT PRIMARY KEY, token TEXT NOT NULL, connected_at INTEGER NOT NULL, info TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS functions (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, description TEXT,
  request_format TEXT, response_format TEXT, metadata TEXT, invocation TEXT);
CREATE TABLE IF NOT EXISTS trigger_types (
  id TEXT PRIMARY KEY, owner TEXT NOT NULL, description TEXT, trigger_request_format TEXT, call_request_format TEXT);
CREATE TABLE IF NOT EXISTS triggers (
  id TEXT PRIMARY KEY, trigger_type TEXT NOT NULL, function_id TEXT NOT NULL, config TEXT,
  metadata TEXT, owner TEXT, status TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS triggers_by_type ON triggers (trigger_type);
`;

const enc = (v: unknown): SqlValue => (v === undefined ? null : JSON.stringify(v));
function dec<T>(v: SqlValue | undefined): T | undefined {
  return typeof v === "string" ? (JSON.parse(v) as T) : undefined;
}
const str = (v: SqlValue | undefined): string | undefined => (typeof v === "string" ? v : undefined);

export class Catalog {
  readonly functions = new Map<string, FunctionRecord>();
  readonly triggerTypes = new Map<string, TriggerTypeRecord>();
  readonly triggers = new Map<string, TriggerRecord>();
  readonly workers = new Map<string, WorkerRecord>();
  private readonly sql: Sql;

  constructor(sql: Sql) {
    this.sql = sql;
    for (const stmt of SCHEMA.split(";").map((s) => s.trim()).filter(Boolean)) sql.exec(stmt);
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
    }
    for (const r of this.sql.exec("SELECT * FROM trigger_types")) {
      const rec: TriggerTypeRecord = { id: String(r.id), owner: String(r.owner) };
      const description = str(r.description);
      if (description !== undefined) rec.description = description;
      if (r.trigger_request_format != null) rec.trigger_request_format = dec(r.trigger_request_format);
      if (r.call_request_format != null) rec.call_request_format = dec(r.call_request_format);
      this.triggerTypes.set(rec.id, rec);
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
      this.triggers.set(rec.id, rec);
    }
    for (const r of this.sql.exec("SELECT * FROM workers")) {
      this.workers.set(String(r.worker_id), {
        worker_id: String(r.worker_id),
        token: String(r.token),
        connected_at: Number(r.connected_at),
        info: dec<Record<string, unknown>>(r.info) ?? {},
      });
    }
  }

  transaction<T>(fn: () => T): T {
    return this.sql.transaction(fn);
  }

  putWorker(w: WorkerRecord): void {
    this.workers.set(w.worker_id, w);
    this.sql.exec(
      "INSERT OR REPLACE INTO workers (worker_id, token, connected_at, info) VALUES (?, ?, ?, ?)",
      w.worker_id, w.token, w.connected_at, JSON.stringify(w.info),
    );
  }
  deleteWorker(workerId: string): void {
    this.workers.delete(workerId);
    this.sql.exec("DELETE FROM workers WHERE worker_id = ?", workerId);
  }

  putFunction(f: FunctionRecord): void {
    this.functions.set(f.id, f);
    this.sql.exec(
      "INSERT OR REPLACE INTO functions (id, kind, owner, description, request_format, response_format, metadata, invocation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      f.id, f.kind, f.owner, f.description ?? null, enc(f.request_format), enc(f.response_format), enc(f.metadata), enc(f.invocation),
    );
  }
  /** Remove a function only if `owner` still owns it (the reconnect race, wire-protocol §2.5). */
  deleteFunction(id: string, owner: string): boolean {
    const f = this.functions.get(id);
    if (!f || f.owner !== owner) return false;
    this.functions.delete(id);
    this.sql.exec("DELETE FROM functions WHERE id = ? AND owner = ?", id, owner);
    return true;
  }

  putTriggerType(t: TriggerTypeRecord): void {
    this.triggerTypes.set(t.id, t);
    this.sql.exec(
      "INSERT OR REPLACE INTO trigger_types (id, owner, description, trigger_request_format, call_request_format) VALUES (?, ?, ?, ?, ?)",
      t.id, t.owner, t.description ?? null, enc(t.trigger_request_format), enc(t.call_request_format),
    );
  }
  deleteTriggerType(id: string, owner: string): boolean {
    const t = this.triggerTypes.get(id);
    if (!t || t.owner !== owner) return false;
    this.triggerTypes.delete(id);
    this.sql.exec("DELETE FROM trigger_types WHERE id = ? AND owner = ?", id, owner);
    return true;
  }

  putTrigger(t: TriggerRecord): void {
    this.triggers.set(t.id, t);
    this.sql.exec(
      "INSERT OR REPLACE INTO triggers (id, trigger_type, function_id, config, metadata, owner, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
      t.id, t.trigger_type, t.function_id, enc(t.config ?? null), enc(t.metadata), t.owner, t.status,
    );
  }
  setTriggerStatus(id: string, status: TriggerStatus): void {
    const t = this.triggers.get(id);
    if (!t || t.status === status) return;
    t.status = status;
    this.sql.exec("UPDATE triggers SET status = ? WHERE id = ?", status, id);
  }
  deleteTrigger(id: string): TriggerRecord | undefined {
    const t = this.triggers.get(id);
    if (!t) return undefined;
    this.triggers.delete(id);
    this.sql.exec("DELETE FROM triggers WHERE id = ?", id);
    return t;
  }

  triggersOfType(type: string): TriggerRecord[] {
    const out: TriggerRecord[] = [];
    for (const t of this.triggers.values()) if (t.trigger_type === type) out.push(t);
    return out;
  }
  countOwnedBy(owner: string): number {
    let n = 0;
    for (const f of this.functions.values()) if (f.owner === owner) n++;
    for (const t of this.triggers.values()) if (t.owner === owner) n++;
    for (const t of this.triggerTypes.values()) if (t.owner === owner) n++;
    return n;
  }
}
