// Where a channel's record and buffered items are kept: SQLite for `engine::channels::create`
// channels (they outlive hibernation), memory for an http request's channels (they live only as
// long as the request that keeps the object awake). Both behave the same for ./hub.ts.
import type { Sql } from "../ports.ts";

export type ChannelItem = { type: "text"; value: string } | { type: "binary"; value: ArrayBuffer };

/** 0 = not attached yet, 1 = attached, 2 = gone (closed, or ended by the engine). */
export type EndState = 0 | 1 | 2;

export interface ChannelRow {
  id: string;
  access_key: string;
  created_at: number;
  buffer_size: number;
  writer: EndState;
  reader: EndState;
  /** How the stream ended, told to the reader after the last item (null: still open). */
  end_code: number | null;
  end_reason: string | null;
  /** Buffered items and their bytes. */
  items: number;
  bytes: number;
  /** When the sweep looks at this channel next. */
  sweep_at: number;
}

/** A new channel's row: no end attached yet, not ended, nothing buffered. */
export function newChannelRow(init: Pick<ChannelRow, "id" | "access_key" | "created_at" | "buffer_size" | "sweep_at">): ChannelRow {
  return { writer: 0, reader: 0, end_code: null, end_reason: null, items: 0, bytes: 0, ...init };
}

export interface ChannelStore {
  get(id: string): ChannelRow | undefined;
  insert(row: ChannelRow): void;
  update(id: string, patch: Partial<Pick<ChannelRow, "writer" | "reader" | "end_code" | "end_reason" | "sweep_at">>): void;
  /** Buffer one item at the end (the caller checked the limits). */
  append(id: string, item: ChannelItem): void;
  /** Take every buffered item, oldest first. */
  drain(id: string): ChannelItem[];
  remove(id: string): void;
}

const encoder = new TextEncoder();
export const itemBytes = (item: ChannelItem): number =>
  item.type === "binary" ? item.value.byteLength : encoder.encode(item.value).byteLength;

export class MemoryChannelStore implements ChannelStore {
  private readonly rows = new Map<string, { row: ChannelRow; items: ChannelItem[] }>();
  get(id: string): ChannelRow | undefined {
    return this.rows.get(id)?.row;
  }
  insert(row: ChannelRow): void {
    this.rows.set(row.id, { row, items: [] });
  }
  update(id: string, patch: Partial<ChannelRow>): void {
    const r = this.rows.get(id);
    if (r) Object.assign(r.row, patch);
  }
  append(id: string, item: ChannelItem): void {
    const r = this.rows.get(id);
    if (!r) return;
    r.items.push(item);
    r.row.items++;
    r.row.bytes += itemBytes(item);
  }
  drain(id: string): ChannelItem[] {
    const r = this.rows.get(id);
    if (!r) return [];
    const out = r.items.splice(0);
    r.row.items = 0;
    r.row.bytes = 0;
    return out;
  }
  remove(id: string): void {
    this.rows.delete(id);
  }
}

type SqlRow = Omit<ChannelRow, "writer" | "reader"> & { writer: number; reader: number };
const rowOf = (r: SqlRow): ChannelRow => ({ ...r, writer: r.writer as ChannelRow["writer"], reader: r.reader as ChannelRow["reader"] });

/**
 * Rows in the object's SQLite, each also kept in memory once read: every chunk a writer sends looks
 * at its channel's row, and a SELECT per chunk was most of what a chunk cost the object (a channel
 * burst spent more in it than in relaying the chunks). This store is the only writer of the table,
 * and it changes the memory copy with every statement it runs, so the copy is the row; after an
 * eviction the object starts with none and reads each row again. (At most MAX_OPEN_CHANNELS rows.)
 */
export class SqlChannelStore implements ChannelStore {
  private readonly sql: Sql;
  private readonly rows = new Map<string, ChannelRow>();
  constructor(sql: Sql) {
    this.sql = sql;
  }
  get(id: string): ChannelRow | undefined {
    const kept = this.rows.get(id);
    if (kept) return kept;
    const r = this.sql.exec<SqlRow>(
      "SELECT id, access_key, created_at, buffer_size, writer, reader, end_code, end_reason, items, bytes, sweep_at FROM channels WHERE id = ?",
      id,
    )[0];
    if (!r) return undefined;
    const row = rowOf(r);
    this.rows.set(id, row);
    return row;
  }
  insert(r: ChannelRow): void {
    this.sql.exec(
      "INSERT INTO channels (id, access_key, created_at, buffer_size, writer, reader, end_code, end_reason, items, bytes, sweep_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      r.id,
      r.access_key,
      r.created_at,
      r.buffer_size,
      r.writer,
      r.reader,
      r.end_code,
      r.end_reason,
      r.items,
      r.bytes,
      r.sweep_at,
    );
    this.rows.set(r.id, { ...r });
  }
  update(id: string, patch: Partial<ChannelRow>): void {
    const keys = (["writer", "reader", "end_code", "end_reason", "sweep_at"] as const).filter((k) => k in patch);
    if (keys.length === 0) return;
    this.sql.exec(`UPDATE channels SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE id = ?`, ...keys.map((k) => patch[k] ?? null), id);
    const kept = this.rows.get(id);
    if (kept) Object.assign(kept, Object.fromEntries(keys.map((k) => [k, patch[k] ?? null])));
  }
  append(id: string, item: ChannelItem): void {
    const n = itemBytes(item);
    const appended = this.sql.transaction(() => {
      const seq = this.sql.exec<{ next_seq: number }>(
        "UPDATE channels SET next_seq = next_seq + 1, items = items + 1, bytes = bytes + ? WHERE id = ? RETURNING next_seq",
        n,
        id,
      )[0];
      if (!seq) return false;
      this.sql.exec("INSERT INTO channel_items (channel_id, seq, kind, data) VALUES (?, ?, ?, ?)", id, seq.next_seq, item.type, item.value);
      return true;
    });
    const kept = this.rows.get(id);
    if (appended && kept) {
      kept.items++;
      kept.bytes += n;
    }
  }
  drain(id: string): ChannelItem[] {
    const items = this.sql.transaction(() => {
      const rows = this.sql.exec<{ kind: string; data: string | ArrayBuffer }>(
        "SELECT kind, data FROM channel_items WHERE channel_id = ? ORDER BY seq",
        id,
      );
      this.sql.exec("DELETE FROM channel_items WHERE channel_id = ?", id);
      this.sql.exec("UPDATE channels SET items = 0, bytes = 0 WHERE id = ?", id);
      return rows.map(
        (r): ChannelItem =>
          r.kind === "binary" ? { type: "binary", value: r.data as ArrayBuffer } : { type: "text", value: String(r.data) },
      );
    });
    const kept = this.rows.get(id);
    if (kept) {
      kept.items = 0;
      kept.bytes = 0;
    }
    return items;
  }
  remove(id: string): void {
    this.sql.exec("DELETE FROM channel_items WHERE channel_id = ?", id);
    this.sql.exec("DELETE FROM channels WHERE id = ?", id);
    this.rows.delete(id);
  }
  count(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM channels")[0]?.n ?? 0;
  }
  nextSweep(): number | null {
    return this.sql.exec<{ t: number | null }>("SELECT MIN(sweep_at) AS t FROM channels")[0]?.t ?? null;
  }
  due(now: number): ChannelRow[] {
    return this.sql
      .exec<SqlRow>(
        "SELECT id, access_key, created_at, buffer_size, writer, reader, end_code, end_reason, items, bytes, sweep_at FROM channels WHERE sweep_at <= ? ORDER BY sweep_at LIMIT 1000",
        now,
      )
      .map(rowOf);
  }
}
