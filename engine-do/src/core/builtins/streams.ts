// Streams (protocol/README.md §7.3, §8.6): three-level JSON items (stream → group → item) in the
// object's SQLite, the `stream`, `stream:join` and `stream:leave` trigger types, and live
// subscriptions for browser clients. A browser socket (`/_iii/streams`, accepted by the Engine
// object) speaks protocol's streams.ts: `join` is answered with a `sync` event carrying the current
// items, then create/update/delete/event pushes follow. Subscriptions are rows of `stream_subs`
// keyed by the socket's id (kept in its attachment), so they survive hibernation. The stream::*
// inputs and results are protocol's BUILTINS.
//
// Custom stream operations (iii's custom stream back-ends, §7.3): a function registered as
// `stream::<op>(<stream_name>)` — what iii-sdk's `createStream(iii, name, impl)` registers — takes
// over that operation for that one stream. `stream::<op>` called for the stream then calls it with
// the same input (no `_caller_worker_id`), and its answer is the answer; for set/update/delete the
// engine still pushes the change to subscribers and fires `stream` triggers, as it does for items it
// stores itself. Browser subscriptions read the group or item through it too.
import {
  IIIError,
  OPEN_GRANT,
  SESSION_GROUP_STREAMS,
  SESSION_ITEM_STREAMS,
  SESSION_OWNER_SCOPE,
  grantSchema,
  mayCall,
  mayUseSession,
  principalOf,
  seesAllSessions,
  type Grant,
  MAX_RESULT_BYTES,
  TRIGGER_TYPES,
  streamSocketMessage,
  type ErrorCode,
  type StreamChange,
  type StreamSocketPush,
  type StreamSubscriptionPayload,
  type StreamTriggerPayload,
  type UpdateOp,
  type UpdateOutput,
} from "@iii-edge/protocol";
import { z } from "zod";
import type { CallContext, CallRequest, EngineApi } from "../api.ts";
import { traceOf, type TraceContext } from "../trace.ts";
import { applyUpdateOps } from "../update-ops.ts";
import { defineBuiltin } from "./define.ts";
import { storedText } from "./input.ts";

/** Subscriptions one browser socket may hold (bounds the fan-out one socket can cause). */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 256;
/** `stream::list_items` page when the caller names no limit: a UI's catch-up in a few round trips. */
export const STREAM_ITEMS_PAGE = 100;
/** What one item adds to a listing besides its value and id (`{"item_id":…,"data":…}`). */
const ITEM_ENVELOPE_BYTES = 24;
/** Deadline for a `stream:join` handler deciding on a subscription. */
const JOIN_TIMEOUT_MS = 10_000;
/** What a browser subscription reads, as a function call would: joining a stream needs a grant
 * that may call this (agent-session streams answer to the session's owner instead). */
export const STREAM_READ_FUNCTION = "stream::get";

const sessionGroups = new Set(SESSION_GROUP_STREAMS);
const sessionItems = new Set(SESSION_ITEM_STREAMS);
const refused = (stream: string, group: string, grant: Grant) => new IIIError("forbidden", `'${grant.sub}' may not use ${stream}/${group}`);

/** The operations a worker may take over for one stream, as in iii: `stream::<op>(<stream_name>)`.
 * (`list_items`, `list_all` and `send` stay the engine's: iii has no custom form of them.) */
export const CUSTOM_STREAM_OPS = ["get", "set", "delete", "list", "list_groups", "update"] as const;
export type CustomStreamOp = (typeof CUSTOM_STREAM_OPS)[number];

/** The function id that takes over `op` for `stream` (iii-sdk's `createStream` registers these). */
export function customStreamOpId(op: CustomStreamOp, stream: string): string {
  return `stream::${op}(${stream})`;
}

/** What a custom set / update / delete must answer (iii's SetResult / UpdateResult / DeleteResult):
 * the engine reads old and new value from it to push the change. */
const customChange = z.object({ old_value: z.unknown().optional(), new_value: z.unknown().optional() });
const customUpdate = customChange.extend({
  errors: z.array(z.object({ op_index: z.number(), code: z.string(), message: z.string() })).optional(),
});
const customDelete = z.object({ old_value: z.unknown().optional() });
const customList = z.array(z.unknown());
const customGroups = z.array(z.string());

/** A value that counts as "there was one" (iii: `Option<Value>` is None for both absent and null). */
const present = (v: unknown): boolean => v !== undefined && v !== null;

/** The shell's side: deliver a JSON message to one browser stream socket. */
export interface StreamSocketPort {
  send(socketId: string, message: StreamSocketPush): boolean;
}

export class Streams {
  private readonly core: EngineApi;
  private sockets: StreamSocketPort | undefined;

  constructor(core: EngineApi) {
    this.core = core;
  }

  // ------------------------------------------------------------------ who may see what

  /** A browser socket was accepted with `grant`. */
  opened(socketId: string, grant: Grant): void {
    this.core.ports.sql.exec(
      "INSERT OR REPLACE INTO stream_socket_grants (socket_id, grant_json) VALUES (?, ?)",
      socketId,
      JSON.stringify(grant),
    );
  }

  /** The grant a socket was accepted with; none (never through the front door) reads as nothing allowed. */
  private socketGrant(socketId: string): Grant | undefined {
    const raw = this.core.ports.sql.exec<{ grant_json: string }>(
      "SELECT grant_json FROM stream_socket_grants WHERE socket_id = ?",
      socketId,
    )[0]?.grant_json;
    if (raw === undefined) return undefined;
    const g = grantSchema.safeParse(JSON.parse(raw));
    return g.success ? g.data : undefined;
  }

  /** The recorded owner of an agent session (engine state `session_owner/<sid>`). */
  private sessionOwner(sessionId: string): string | undefined {
    const row = this.core.ports.sql.exec<{ value: string }>(
      "SELECT value FROM state WHERE scope = ? AND key = ?",
      SESSION_OWNER_SCOPE,
      sessionId,
    )[0];
    if (!row) return undefined;
    const v = JSON.parse(row.value) as { sub?: unknown } | null;
    return typeof v?.sub === "string" ? v.sub : undefined;
  }

  /** May `grant` use agent session `sessionId`? */
  private maySeeSession(grant: Grant, sessionId: string): boolean {
    const p = principalOf(grant);
    return mayUseSession(p, sessionId, undefined) || mayUseSession(p, sessionId, this.sessionOwner(sessionId));
  }

  /**
   * May `grant` read or write `stream/group(/item)`? A group of an agent-session stream is its
   * session's; an item of `agent::sessions` is its session's (`item` null: the whole group, which
   * a grant that does not see every session reads filtered). Other streams: whoever may read them
   * by function call. Trusted code runs with OPEN_GRANT, which sees every session.
   */
  mayUse(grant: Grant, stream: string, group: string, item: string | null): boolean {
    if (sessionGroups.has(stream)) return this.maySeeSession(grant, group);
    if (sessionItems.has(stream)) return item === null || this.maySeeSession(grant, item);
    return true;
  }

  /** Throw `forbidden` unless `ctx`'s caller may use the stream group (or item). */
  private guard(ctx: CallContext | undefined, stream: string, group: string, item: string | null): void {
    const grant = ctx?.grant ?? OPEN_GRANT;
    if (!this.mayUse(grant, stream, group, item)) throw refused(stream, group, grant);
  }

  /** Whether a reader with `grant` sees only some items of `stream` (filtered by session). */
  private filtered(grant: Grant, stream: string): boolean {
    return sessionItems.has(stream) && !seesAllSessions(grant);
  }

  /** Run `fn` if `ctx`'s caller may use the stream group (or item); else `forbidden`. */
  checked<T>(ctx: CallContext, stream: string, group: string, item: string | null, fn: () => T): T {
    this.guard(ctx, stream, group, item);
    return fn();
  }

  /** The groups of `stream` a reader with `grant` may see. */
  visibleGroups(grant: Grant, stream: string, groups: string[]): string[] {
    return sessionGroups.has(stream) ? groups.filter((g) => this.maySeeSession(grant, g)) : groups;
  }

  /** The stored items of a group `grant` may see, with their ids. */
  private visibleRows(grant: Grant, stream: string, group: string): { item_id: string; value: string }[] {
    const rows = this.core.ports.sql.exec<{ item_id: string; value: string }>(
      "SELECT item_id, value FROM stream_items WHERE stream_name = ? AND group_id = ? ORDER BY item_id",
      stream,
      group,
    );
    return rows.filter((r) => this.maySeeSession(grant, r.item_id));
  }

  setSockets(port: StreamSocketPort): void {
    this.sockets = port;
  }

  /** Drop subscriptions of sockets that no longer exist (a restart drops every socket). */
  forgetSocketsExcept(live: Set<string>): void {
    const { sql } = this.core.ports;
    for (const r of sql.exec<{ socket_id: string }>("SELECT DISTINCT socket_id FROM stream_subs")) {
      if (!live.has(r.socket_id)) sql.exec("DELETE FROM stream_subs WHERE socket_id = ?", r.socket_id);
    }
    for (const r of sql.exec<{ socket_id: string }>("SELECT socket_id FROM stream_socket_grants")) {
      if (!live.has(r.socket_id)) sql.exec("DELETE FROM stream_socket_grants WHERE socket_id = ?", r.socket_id);
    }
  }

  // ------------------------------------------------------------------ items

  read(stream: string, group: string, item: string): unknown {
    const r = this.core.ports.sql.exec<{ value: string }>(
      "SELECT value FROM stream_items WHERE stream_name = ? AND group_id = ? AND item_id = ?",
      stream,
      group,
      item,
    )[0];
    return r ? JSON.parse(r.value) : undefined;
  }
  list(stream: string, group: string): unknown[] {
    return this.core.ports.sql
      .exec<{ value: string }>("SELECT value FROM stream_items WHERE stream_name = ? AND group_id = ? ORDER BY item_id", stream, group)
      .map((r) => JSON.parse(r.value));
  }
  /** One page of a group's items after `after` (exclusive), by item id; `next` is the last id of a
   * full page (null at the end). A page also ends early at MAX_RESULT_BYTES, so it fits a frame. */
  listItems(
    stream: string,
    group: string,
    after: string | undefined,
    limit: number,
    grant?: Grant,
  ): { items: { item_id: string; data: unknown }[]; next: string | null } {
    const page = this.listItemsPage(stream, group, after, limit);
    // A reader that does not see every session gets only its own sessions' items (the cursor
    // still moves over the others, so paging goes on).
    if (grant && this.filtered(grant, stream)) page.items = page.items.filter((i) => this.maySeeSession(grant, i.item_id));
    return page;
  }
  private listItemsPage(
    stream: string,
    group: string,
    after: string | undefined,
    limit: number,
  ): { items: { item_id: string; data: unknown }[]; next: string | null } {
    const rows = this.core.ports.sql.exec<{ item_id: string; value: string }>(
      "SELECT item_id, value FROM stream_items WHERE stream_name = ? AND group_id = ? AND item_id > ? ORDER BY item_id LIMIT ?",
      stream,
      group,
      after ?? "",
      limit,
    );
    const items: { item_id: string; data: unknown }[] = [];
    let bytes = 0;
    for (const r of rows) {
      bytes += r.value.length + r.item_id.length + ITEM_ENVELOPE_BYTES;
      if (bytes > MAX_RESULT_BYTES && items.length > 0) return { items, next: items.at(-1)!.item_id };
      items.push({ item_id: r.item_id, data: JSON.parse(r.value) });
    }
    return { items, next: items.length === limit ? items.at(-1)!.item_id : null };
  }
  private write(stream: string, group: string, item: string, value: unknown, code: ErrorCode): void {
    this.store(stream, group, item, storedText(value), code);
  }
  private store(stream: string, group: string, item: string, text: string, code: ErrorCode): void {
    try {
      this.core.ports.sql.exec(
        "INSERT OR REPLACE INTO stream_items (stream_name, group_id, item_id, value) VALUES (?, ?, ?, ?)",
        stream,
        group,
        item,
        text,
      );
    } catch (e) {
      throw new IIIError(code, `could not store ${stream}/${group}/${item}: ${String(e)}`);
    }
  }

  set(stream: string, group: string, item: string, data: unknown, trace?: TraceContext): { old_value: unknown; new_value: unknown } {
    const old = this.read(stream, group, item);
    this.write(stream, group, item, data, "stream_set_error");
    this.emit(stream, group, item, { type: old === undefined ? "create" : "update", data: data ?? null }, trace);
    return { old_value: old ?? null, new_value: data ?? null };
  }
  /** Store `items` as that many `set`s would, in one transaction: every value is sized before the
   * first row is written, so a refused batch stores nothing; the pushes and `stream` trigger fires
   * follow the commit, one per item in order, create or update as each set would have said. */
  setMany(stream: string, group: string, items: readonly { item_id: string; data: unknown }[], trace?: TraceContext): { count: number } {
    const texts = items.map((it, i) => storedText(it.data, `items[${i}] (${it.item_id}): value`));
    const { sql } = this.core.ports;
    const existed = sql.transaction(() =>
      items.map((it, i) => {
        const had = sql.exec(
          "SELECT 1 FROM stream_items WHERE stream_name = ? AND group_id = ? AND item_id = ?",
          stream,
          group,
          it.item_id,
        );
        this.store(stream, group, it.item_id, texts[i]!, "stream_set_error");
        return had.length > 0;
      }),
    );
    items.forEach((it, i) =>
      this.emit(stream, group, it.item_id, { type: existed[i] ? "update" : "create", data: it.data ?? null }, trace),
    );
    return { count: items.length };
  }
  update(stream: string, group: string, item: string, ops: UpdateOp[], trace?: TraceContext): UpdateOutput {
    const old = this.read(stream, group, item);
    const { value, errors } = applyUpdateOps(old, ops);
    this.write(stream, group, item, value, "stream_update_error");
    this.emit(stream, group, item, { type: old === undefined ? "create" : "update", data: value }, trace);
    const out: UpdateOutput = { old_value: old ?? null, new_value: value };
    if (errors.length > 0) out.errors = errors;
    return out;
  }
  delete(stream: string, group: string, item: string, trace?: TraceContext): { old_value: unknown } {
    const old = this.read(stream, group, item);
    if (old !== undefined) {
      this.core.ports.sql.exec("DELETE FROM stream_items WHERE stream_name = ? AND group_id = ? AND item_id = ?", stream, group, item);
      this.emit(stream, group, item, { type: "delete", data: old }, trace);
    }
    return { old_value: old ?? null };
  }

  // ------------------------------------------------------------------ custom operations

  /** The function that takes over `op` for `stream`, if a worker registered one. */
  customOp(op: CustomStreamOp, stream: string): string | undefined {
    const id = customStreamOpId(op, stream);
    return this.core.catalog.functions.has(id) ? id : undefined;
  }

  /** Call the custom operation `id` with the operation's input; its error is the caller's error,
   * unchanged (its code says what failed). */
  private async callCustom(id: string, input: unknown, ctx?: CallContext): Promise<unknown> {
    const req: CallRequest = { function_id: id, data: input };
    if (ctx) {
      req.grant = ctx.grant;
      if (ctx.traceparent) req.traceparent = ctx.traceparent;
      if (ctx.baggage) req.baggage = ctx.baggage;
    }
    const out = await this.core.invoke(req);
    if (!out.ok) throw IIIError.relayed(out.error);
    return out.result;
  }

  /** A custom operation's answer, checked against what the engine reads from it. */
  private async customAnswer<T>(id: string, input: unknown, schema: z.ZodType<T>, shape: string, ctx?: CallContext): Promise<T> {
    const result = await this.callCustom(id, input, ctx);
    if (result === undefined) throw new IIIError("invocation_failed", `${id} returned no result; it must return ${shape}`);
    const r = schema.safeParse(result);
    if (!r.success)
      throw new IIIError("invocation_failed", `${id} returned ${JSON.stringify(result).slice(0, 200)}; it must return ${shape}`);
    return r.data;
  }

  /** stream::get: the custom operation's answer as it is (absent = no item), else the stored item. */
  async get(stream: string, group: string, item: string, ctx?: CallContext): Promise<unknown> {
    const id = this.customOp("get", stream);
    if (!id) return this.read(stream, group, item);
    return this.callCustom(id, { stream_name: stream, group_id: group, item_id: item }, ctx);
  }
  /** stream::list: the custom operation's array of values, else the stored items. */
  async listGroup(stream: string, group: string, ctx?: CallContext): Promise<unknown[]> {
    const id = this.customOp("list", stream);
    if (!id)
      return ctx && this.filtered(ctx.grant, stream)
        ? this.visibleRows(ctx.grant, stream, group).map((r) => JSON.parse(r.value))
        : this.list(stream, group);
    return this.customAnswer(id, { stream_name: stream, group_id: group }, customList, "an array of values", ctx);
  }
  /** stream::list_groups: the custom operation's group ids, else the stored ones. */
  async groups(stream: string, ctx?: CallContext): Promise<string[]> {
    const id = this.customOp("list_groups", stream);
    if (!id)
      return this.core.ports.sql
        .exec<{ group_id: string }>("SELECT DISTINCT group_id FROM stream_items WHERE stream_name = ? ORDER BY group_id", stream)
        .map((r) => r.group_id);
    return this.customAnswer(id, { stream_name: stream }, customGroups, "an array of group ids (strings)", ctx);
  }
  /** stream::set through its custom operation when there is one; the change is pushed either way. */
  async setAny(
    stream: string,
    group: string,
    item: string,
    data: unknown,
    ctx?: CallContext,
  ): Promise<{ old_value: unknown; new_value: unknown }> {
    const id = this.customOp("set", stream);
    if (!id) return this.set(stream, group, item, data, ctx);
    const r = await this.customAnswer(
      id,
      { stream_name: stream, group_id: group, item_id: item, data: data ?? null },
      customChange,
      "{old_value?, new_value}",
      ctx,
    );
    const out = { old_value: r.old_value ?? null, new_value: r.new_value ?? null };
    this.emit(stream, group, item, { type: present(r.old_value) ? "update" : "create", data: out.new_value }, ctx);
    return out;
  }
  /** stream::set_many: the caller may use every item (checked before anything is written), then
   * one transaction; a stream whose set a worker took over gets one call of it per item, in order,
   * each pushed as `setAny` pushes it (atomic only if that back end makes it so). */
  async setManyAny(
    stream: string,
    group: string,
    items: readonly { item_id: string; data: unknown }[],
    ctx: CallContext,
  ): Promise<{ count: number }> {
    for (const it of items) this.guard(ctx, stream, group, it.item_id);
    if (!this.customOp("set", stream)) return this.setMany(stream, group, items, ctx);
    for (const it of items) await this.setAny(stream, group, it.item_id, it.data, ctx);
    return { count: items.length };
  }
  /** stream::update through its custom operation when there is one; the change is pushed either way. */
  async updateAny(stream: string, group: string, item: string, ops: UpdateOp[], ctx?: CallContext): Promise<UpdateOutput> {
    const id = this.customOp("update", stream);
    if (!id) return this.update(stream, group, item, ops, ctx);
    const r = await this.customAnswer(
      id,
      { stream_name: stream, group_id: group, item_id: item, ops },
      customUpdate,
      "{old_value?, new_value, errors?}",
      ctx,
    );
    const out: UpdateOutput = { old_value: r.old_value ?? null, new_value: r.new_value ?? null };
    if (r.errors && r.errors.length > 0) out.errors = r.errors;
    this.emit(stream, group, item, { type: present(r.old_value) ? "update" : "create", data: out.new_value }, ctx);
    return out;
  }
  /** stream::delete through its custom operation when there is one; a deletion that removed
   * something is pushed either way. */
  async deleteAny(stream: string, group: string, item: string, ctx?: CallContext): Promise<{ old_value: unknown }> {
    const id = this.customOp("delete", stream);
    if (!id) return this.delete(stream, group, item, ctx);
    const r = await this.customAnswer(id, { stream_name: stream, group_id: group, item_id: item }, customDelete, "{old_value?}", ctx);
    if (present(r.old_value)) this.emit(stream, group, item, { type: "delete", data: r.old_value }, ctx);
    return { old_value: r.old_value ?? null };
  }

  // ------------------------------------------------------------------ events

  /** Push to subscribed sockets now, and fire `stream` triggers in the background, in order, in
   * the trace of the call that caused the event. */
  emit(stream: string, group: string, item: string | null, event: StreamChange, trace?: TraceContext): void {
    const timestamp = this.core.ports.clock.now();
    const msg: StreamTriggerPayload = { type: "stream", timestamp, streamName: stream, groupId: group, id: item, event };
    if (this.sockets) {
      const subs = this.core.ports.sql.exec<{ socket_id: string; item_id: string | null }>(
        "SELECT socket_id, item_id FROM stream_subs WHERE stream_name = ? AND group_id = ?",
        stream,
        group,
      );
      const sent = new Set<string>();
      const owned = sessionGroups.has(stream) || sessionItems.has(stream);
      for (const s of subs) {
        if (s.item_id !== null && item !== null && s.item_id !== item) continue;
        if (sent.has(s.socket_id)) continue; // one push per socket, whatever its subscriptions
        if (owned && !this.socketSees(s.socket_id, stream, group, item)) continue;
        sent.add(s.socket_id);
        this.sockets.send(s.socket_id, msg);
      }
    }
    const bindings = this.core.activeBindings(TRIGGER_TYPES.stream).filter((b) => {
      const c = (b.config ?? {}) as { stream_name?: string; group_id?: string; item_id?: string };
      return (
        c.stream_name === stream && (c.group_id === undefined || c.group_id === group) && (c.item_id === undefined || c.item_id === item)
      );
    });
    if (bindings.length === 0) return;
    this.core.ports.background(
      (async () => {
        for (const b of bindings) await this.core.fire(b, msg, traceOf(trace));
      })(),
    );
  }

  // ------------------------------------------------------------------ browser sockets

  /** One text message from a browser stream socket. Bad input is answered, never fatal. */
  async message(socketId: string, raw: string | ArrayBuffer): Promise<void> {
    let value: unknown;
    try {
      value = JSON.parse(typeof raw === "string" ? raw : new TextDecoder().decode(raw));
    } catch {
      return;
    }
    const m = streamSocketMessage.safeParse(value);
    if (!m.success) return;
    const { subscriptionId, streamName, groupId } = m.data.data;
    const id = m.data.data.id ?? null;
    if (m.data.type === "leave") {
      this.leave(socketId, subscriptionId);
      return;
    }
    await this.join(socketId, subscriptionId, streamName, groupId, id);
  }

  /** Does the socket's grant let it see this change of an agent-session stream? */
  private socketSees(socketId: string, stream: string, group: string, item: string | null): boolean {
    const grant = this.socketGrant(socketId);
    if (!grant) return false;
    if (item === null && this.filtered(grant, stream)) return false;
    return this.mayUse(grant, stream, group, item);
  }

  /** May the socket join? A session's group (`agent::events/<sid>`): the session's owner or a
   * `sessions` grant. The list of sessions (`agent::sessions`): one item, its session's; the whole
   * group, a grant that sees every session, or a stream reader (filtered to its own sessions). Any
   * other stream: a grant that may read it by function call. */
  private mayJoin(grant: Grant | undefined, stream: string, group: string, item: string | null): boolean {
    if (!grant) return false;
    if (sessionGroups.has(stream)) return this.mayUse(grant, stream, group, item);
    if (sessionItems.has(stream) && item !== null) return this.mayUse(grant, stream, group, item);
    return seesAllSessions(grant) || mayCall(grant, STREAM_READ_FUNCTION);
  }

  private async join(socketId: string, subscriptionId: string, streamName: string, groupId: string, id: string | null): Promise<void> {
    const { sql, clock } = this.core.ports;
    const base = { type: "stream" as const, timestamp: clock.now(), streamName, groupId, id };
    const count = sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM stream_subs WHERE socket_id = ?", socketId)[0]?.n ?? 0;
    if (count >= MAX_SUBSCRIPTIONS_PER_SOCKET) {
      this.sockets?.send(socketId, {
        ...base,
        event: { type: "unauthorized", data: { reason: `at most ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions per socket` } },
      });
      return;
    }
    // The same refusal whether the group exists or not: a stranger learns nothing about a session.
    const grant = this.socketGrant(socketId);
    if (!this.mayJoin(grant, streamName, groupId, id)) {
      this.sockets?.send(socketId, {
        ...base,
        event: { type: "unauthorized", data: { reason: `'${grant?.sub ?? "unknown"}' may not read ${streamName}/${groupId}` } },
      });
      return;
    }
    const payload: StreamSubscriptionPayload = { subscription_id: subscriptionId, stream_name: streamName, group_id: groupId };
    if (id !== null) payload.id = id;
    // Every join binding is asked (filtered by stream_name when it sets one); any {unauthorized:true} rejects.
    for (const b of this.core.activeBindings(TRIGGER_TYPES.streamJoin)) {
      const want = (b.config as { stream_name?: string } | null)?.stream_name;
      if (want !== undefined && want !== streamName) continue;
      const out = await this.core.fire(b, payload, { timeoutMs: JOIN_TIMEOUT_MS });
      if (
        out !== "skipped" &&
        out.ok &&
        out.result &&
        typeof out.result === "object" &&
        (out.result as { unauthorized?: unknown }).unauthorized === true
      ) {
        this.sockets?.send(socketId, { ...base, event: { type: "unauthorized" } });
        return;
      }
    }
    sql.exec(
      "INSERT OR REPLACE INTO stream_subs (socket_id, subscription_id, stream_name, group_id, item_id) VALUES (?, ?, ?, ?, ?)",
      socketId,
      subscriptionId,
      streamName,
      groupId,
      id,
    );
    let data: unknown;
    try {
      // Through the stream's custom get / list when a worker provides them (as iii does).
      data =
        id === null
          ? grant && this.filtered(grant, streamName)
            ? this.visibleRows(grant, streamName, groupId).map((r) => JSON.parse(r.value) as unknown)
            : await this.listGroup(streamName, groupId)
          : ((await this.get(streamName, groupId, id)) ?? null);
    } catch (e) {
      // As iii: the subscription stands and its changes will be pushed; there is no sync to send.
      this.core.ports.log.warn("stream subscription: the custom stream operation failed; no sync sent", {
        stream_name: streamName,
        group_id: groupId,
        error: e instanceof Error ? e.message : String(e),
      });
      return;
    }
    this.sockets?.send(socketId, { ...base, timestamp: clock.now(), event: { type: "sync", data } });
  }

  private leave(socketId: string, subscriptionId: string): void {
    const { sql } = this.core.ports;
    const row = sql.exec<{ stream_name: string; group_id: string; item_id: string | null }>(
      "SELECT stream_name, group_id, item_id FROM stream_subs WHERE socket_id = ? AND subscription_id = ?",
      socketId,
      subscriptionId,
    )[0];
    if (!row) return;
    sql.exec("DELETE FROM stream_subs WHERE socket_id = ? AND subscription_id = ?", socketId, subscriptionId);
    this.fireLeave(subscriptionId, row);
  }

  /** The browser socket closed: every subscription it held ends. */
  closed(socketId: string): void {
    const { sql } = this.core.ports;
    const rows = sql.exec<{ subscription_id: string; stream_name: string; group_id: string; item_id: string | null }>(
      "SELECT subscription_id, stream_name, group_id, item_id FROM stream_subs WHERE socket_id = ?",
      socketId,
    );
    sql.exec("DELETE FROM stream_subs WHERE socket_id = ?", socketId);
    sql.exec("DELETE FROM stream_socket_grants WHERE socket_id = ?", socketId);
    for (const r of rows) this.fireLeave(r.subscription_id, r);
  }

  private fireLeave(subscriptionId: string, row: { stream_name: string; group_id: string; item_id: string | null }): void {
    const payload: StreamSubscriptionPayload = { subscription_id: subscriptionId, stream_name: row.stream_name, group_id: row.group_id };
    if (row.item_id !== null) payload.id = row.item_id;
    for (const b of this.core.activeBindings(TRIGGER_TYPES.streamLeave)) {
      const want = (b.config as { stream_name?: string } | null)?.stream_name;
      if (want !== undefined && want !== row.stream_name) continue;
      this.core.ports.background(this.core.fire(b, payload));
    }
  }

  subscriptionCount(): number {
    return this.core.ports.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM stream_subs")[0]?.n ?? 0;
  }
}

const optionalStreamConfig = (config: unknown, requireStream: boolean): string | undefined => {
  if (config === null || config === undefined) return requireStream ? "stream_name is required" : undefined;
  if (typeof config !== "object" || Array.isArray(config)) return "config must be an object";
  const c = config as Record<string, unknown>;
  if (requireStream && (typeof c.stream_name !== "string" || !c.stream_name)) return "stream_name is required";
  for (const k of ["stream_name", "group_id", "item_id", "condition_function_id"]) {
    if (c[k] !== undefined && typeof c[k] !== "string") return `${k} must be a string`;
  }
  return undefined;
};

export function installStreams(core: EngineApi): Streams {
  const s = new Streams(core);
  core.addTriggerType({
    id: TRIGGER_TYPES.stream,
    description: "Fires on stream item create/update/delete and custom events ({stream_name, group_id?, item_id?})",
    validate: (config) => optionalStreamConfig(config, true),
  });
  core.addTriggerType({
    id: TRIGGER_TYPES.streamJoin,
    description: "Fires when a browser subscribes to a stream; returning {unauthorized:true} rejects it",
    validate: (config) => optionalStreamConfig(config, false),
  });
  core.addTriggerType({
    id: TRIGGER_TYPES.streamLeave,
    description: "Fires when a browser subscription ends (leave or socket closed)",
    validate: (config) => optionalStreamConfig(config, false),
  });

  // set / get / delete / list / list_groups / update go through `stream::<op>(<stream_name>)` when
  // a worker registered it (see the top of this file).
  defineBuiltin(core, "stream::set", {
    description: "Store an item: {stream_name, group_id, item_id, data} → {old_value, new_value}",
    handler: (q, ctx) =>
      s.checked(ctx, q.stream_name, q.group_id, q.item_id, () => s.setAny(q.stream_name, q.group_id, q.item_id, q.data, ctx)),
  });
  defineBuiltin(core, "stream::set_many", {
    description:
      "Store items of one group in one transaction, in order, each as stream::set would: {stream_name, group_id, items:[{item_id, data}]} → {count}",
    handler: (q, ctx) => s.setManyAny(q.stream_name, q.group_id, q.items, ctx),
  });
  defineBuiltin(core, "stream::get", {
    description: "Read an item; no result when absent",
    handler: (q, ctx) => s.checked(ctx, q.stream_name, q.group_id, q.item_id, () => s.get(q.stream_name, q.group_id, q.item_id, ctx)),
  });
  defineBuiltin(core, "stream::delete", {
    description: "Delete an item → {old_value}",
    handler: (q, ctx) => s.checked(ctx, q.stream_name, q.group_id, q.item_id, () => s.deleteAny(q.stream_name, q.group_id, q.item_id, ctx)),
  });
  defineBuiltin(core, "stream::list", {
    description: "Items of a group, as an array of values",
    handler: (q, ctx) => s.checked(ctx, q.stream_name, q.group_id, null, () => s.listGroup(q.stream_name, q.group_id, ctx)),
  });
  defineBuiltin(core, "stream::list_items", {
    description:
      "A group's items with their ids, in item-id order after `after`: {stream_name, group_id, after?, limit?} → {items:[{item_id, data}], next}",
    handler: (q, ctx) =>
      s.checked(ctx, q.stream_name, q.group_id, null, () =>
        s.listItems(q.stream_name, q.group_id, q.after, q.limit ?? STREAM_ITEMS_PAGE, ctx.grant),
      ),
  });
  defineBuiltin(core, "stream::list_groups", {
    description: "Group ids of a stream",
    handler: async (q, ctx) => s.visibleGroups(ctx.grant, q.stream_name, await s.groups(q.stream_name, ctx)),
  });
  defineBuiltin(core, "stream::list_all", {
    description: "Every stream with its groups → {stream:[{id, groups}], count}",
    handler: (_q, ctx) => {
      const rows = core.ports.sql.exec<{ stream_name: string; group_id: string }>(
        "SELECT DISTINCT stream_name, group_id FROM stream_items ORDER BY stream_name, group_id",
      );
      const by = new Map<string, string[]>();
      for (const r of rows)
        if (s.mayUse(ctx.grant, r.stream_name, r.group_id, null)) by.set(r.stream_name, [...(by.get(r.stream_name) ?? []), r.group_id]);
      const stream = [...by].map(([id, groups]) => ({ id, groups }));
      return { stream, count: stream.length };
    },
  });
  defineBuiltin(core, "stream::send", {
    description: "Send a custom event {stream_name, group_id, id?, type, data} to subscribers and stream triggers",
    handler: (q, ctx) =>
      s.checked(ctx, q.stream_name, q.group_id, q.id ?? null, () => {
        s.emit(q.stream_name, q.group_id, q.id ?? null, { type: "event", event: { type: q.type, data: q.data ?? null } }, ctx);
        return undefined;
      }),
  });
  defineBuiltin(core, "stream::update", {
    description: "Apply update ops to an item → {old_value, new_value, errors?}",
    handler: (q, ctx) =>
      s.checked(ctx, q.stream_name, q.group_id, q.item_id, () => s.updateAny(q.stream_name, q.group_id, q.item_id, q.ops, ctx)),
  });
  return s;
}
