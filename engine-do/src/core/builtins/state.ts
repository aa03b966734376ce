// state::* (protocol/README.md §7.2) on the object's SQLite, and the `state` trigger type (§8.3).
// A write is one transaction with what it causes: its trigger fires (durable messages, one per
// matching binding) and the queue message its `enqueue` asks for. Inputs and results: protocol's
// BUILTINS.
import {
  IIIError,
  MAX_LIST_PAGE,
  TRIGGER_TYPES,
  exceedsJsonDepth,
  jsonDepthMessage,
  mayCall,
  stateTriggerConfig,
  type ErrorCode,
  type StateEnqueue,
  type StateEventType,
  type StateSetOutput,
  type StateTriggerPayload,
  type StateUpdateOutput,
  formatIssues,
} from "@iii-edge/protocol";
import type { CallContext, EngineApi, EnqueueRequest } from "../api.ts";
import { MAX_STATE_BYTES_PER_PRINCIPAL, MAX_STATE_KEYS_PER_PRINCIPAL, type StateQuota } from "../bounds.ts";
import { STATE_TRIGGER_PREFIX } from "../queues/config.ts";
import { stateFireGroup, type PreparedEnqueue, type QueueRouter } from "../queues/router.ts";
import { applyUpdateOps } from "../update-ops.ts";
import { defineBuiltin } from "./define.ts";
import { storedText } from "./input.ts";
import { stateListing } from "./state-list.ts";

/** JSON text with object keys sorted, so equal values compare equal whatever their key order. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}
const sameJson = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/**
 * Fires one binding may have waiting (its handler failing or slow for a long time, each fire a copy
 * of the old and the new value): beyond it a new fire is dropped with a warning, so a broken
 * handler cannot grow the object's storage without bound. Far above what a working handler leaves.
 */
const MAX_WAITING_FIRES_PER_BINDING = 10_000;

export function installState(
  core: EngineApi,
  queues: QueueRouter,
  quota: StateQuota = { keys: MAX_STATE_KEYS_PER_PRINCIPAL, bytes: MAX_STATE_BYTES_PER_PRINCIPAL },
): void {
  const { sql } = core.ports;

  const read = (scope: string, key: string): unknown => {
    const row = sql.exec<{ value: string }>("SELECT value FROM state WHERE scope = ? AND key = ?", scope, key)[0];
    return row ? JSON.parse(row.value) : undefined;
  };
  /** Whom a stored value counts for, and how much. */
  const holderOf = (scope: string, key: string): { principal: string | null; charge: number } | undefined => {
    const row = sql.exec<{ principal: string | null; charge: number | null }>(
      "SELECT principal, charge FROM state WHERE scope = ? AND key = ?",
      scope,
      key,
    )[0];
    return row ? { principal: row.principal, charge: row.charge ?? 0 } : undefined;
  };
  const usage = (principal: string): StateQuota => {
    const row = sql.exec<{ keys: number; bytes: number }>("SELECT keys, bytes FROM state_quota WHERE principal = ?", principal)[0];
    return { keys: Number(row?.keys ?? 0), bytes: Number(row?.bytes ?? 0) };
  };
  const account = (principal: string | null, keys: number, bytes: number) => {
    if (principal === null) return;
    sql.exec(
      "INSERT INTO state_quota (principal, keys, bytes) VALUES (?, ?, ?) ON CONFLICT (principal) DO UPDATE SET keys = keys + excluded.keys, bytes = bytes + excluded.bytes",
      principal,
      keys,
      bytes,
    );
    if (keys < 0) sql.exec("DELETE FROM state_quota WHERE principal = ? AND keys <= 0", principal);
  };
  const write = (scope: string, key: string, value: unknown, code: ErrorCode, ctx: CallContext) => {
    // A value nested deeper than MAX_JSON_DEPTH could be stored but not read back (a recursive
    // serialiser on the way out overflows the stack): refused before it is stored.
    if (exceedsJsonDepth(value)) throw new IIIError("invalid_input", jsonDepthMessage("value"));
    const text = storedText(value);
    // The per-principal quota (bounds.ts), checked before anything is stored: the value counts for
    // its writer from now on, and whoever it counted for before gets it back.
    const charge = text.length + scope.length + key.length;
    const prev = holderOf(scope, key);
    const principal = ctx.principal ?? null;
    if (principal !== null) {
      const use = usage(principal);
      const mine = prev !== undefined && prev.principal === principal;
      if (!mine && use.keys + 1 > quota.keys) {
        throw new IIIError(
          "quota_exceeded",
          `'${principal}' holds ${use.keys} state keys in this namespace, its quota (${quota.keys}); delete some first`,
        );
      }
      const bytes = use.bytes + charge - (mine ? prev.charge : 0);
      // (A write that shrinks what the principal holds is let through even over the quota.)
      if (bytes > quota.bytes && bytes > use.bytes) {
        throw new IIIError(
          "quota_exceeded",
          `'${principal}' would hold ${bytes} bytes of state in this namespace, over its quota (${quota.bytes}); delete some first`,
        );
      }
    }
    try {
      sql.exec(
        "INSERT OR REPLACE INTO state (scope, key, value, principal, charge) VALUES (?, ?, ?, ?, ?)",
        scope,
        key,
        text,
        principal,
        charge,
      );
    } catch (e) {
      throw new IIIError(code, `could not store ${scope}/${key}: ${String(e)}`);
    }
    if (prev) account(prev.principal, -1, -prev.charge);
    account(principal, 1, charge);
  };

  /**
   * The `state` trigger fires of one write (§8.3): one durable message per matching binding, on
   * the binding's queue `state:<trigger id>`, stored by the caller inside the write's transaction
   * — so a fire exists exactly when its write does, survives eviction, and is retried until its
   * handler succeeds. Delivered after the write answers (the durable queue's pump).
   */
  const fires = (event_type: StateEventType, scope: string, key: string, old_value: unknown, new_value: unknown, ctx: CallContext) => {
    const bindings = core.activeBindings(TRIGGER_TYPES.state).filter((b) => {
      const c = (b.config ?? {}) as { scope?: string; key?: string };
      return (c.scope === undefined || c.scope === scope) && (c.key === undefined || c.key === key);
    });
    const payload: StateTriggerPayload = {
      type: "state",
      event_type,
      scope,
      key,
      old_value: old_value ?? null,
      new_value: new_value ?? null,
    };
    const group = stateFireGroup(scope, key);
    for (const b of bindings) {
      const queue = `${STATE_TRIGGER_PREFIX}${b.id}`;
      if (queues.durable.holdsAtLeast(queue, MAX_WAITING_FIRES_PER_BINDING)) {
        core.ports.log.warn("state trigger fire dropped: its binding has too many fires waiting", {
          trigger: b.id,
          function_id: b.function_id,
          scope,
          key,
          waiting: MAX_WAITING_FIRES_PER_BINDING,
        });
        continue;
      }
      const req: EnqueueRequest = { queue, function_id: b.function_id, data: payload };
      if (ctx.traceparent) req.traceparent = ctx.traceparent;
      if (ctx.baggage) req.baggage = ctx.baggage;
      queues.commitPrepared(queues.prepare(req, { trigger_id: b.id, group }));
    }
  };

  /** A write's `enqueue` (§7.2), checked before anything is written: the queue (durable), the
   * fifo group, the caller's right to call the function. */
  const prepareEnqueue = (e: StateEnqueue | undefined, ctx: CallContext): PreparedEnqueue | undefined => {
    if (!e) return undefined;
    if (!mayCall(ctx.grant, e.function_id)) throw new IIIError("forbidden", `'${ctx.grant.sub}' may not call ${e.function_id}`);
    const req: EnqueueRequest = { queue: e.queue, function_id: e.function_id, data: e.payload ?? null };
    if (ctx.principal !== undefined) req.principal = ctx.principal;
    if (e.idempotency_key) req.idempotency_key = e.idempotency_key;
    if (ctx.traceparent) req.traceparent = ctx.traceparent;
    if (ctx.baggage) req.baggage = ctx.baggage;
    return queues.prepare(req);
  };

  defineBuiltin(core, "state::set", {
    description:
      "Store a JSON value under scope/key; returns {old_value, new_value}; with `enqueue`, a queue message stored in the same transaction ({messageReceiptId})",
    handler: ({ scope, key, value, data, enqueue }, ctx) => {
      const next = value !== undefined ? value : data;
      const prepared = prepareEnqueue(enqueue, ctx);
      // The write, its trigger fires and its message commit together or not at all.
      return sql.transaction(() => {
        const old = read(scope, key);
        write(scope, key, next, "set_error", ctx);
        fires(old === undefined ? "state:created" : "state:updated", scope, key, old, next, ctx);
        const out: StateSetOutput = { old_value: old ?? null, new_value: next ?? null };
        if (prepared) out.messageReceiptId = queues.commitPrepared(prepared);
        return out;
      });
    },
  });
  defineBuiltin(core, "state::get", {
    description: "Read scope/key; no result when absent",
    handler: ({ scope, key }) => read(scope, key),
  });
  defineBuiltin(core, "state::delete", {
    description: "Delete scope/key; returns the previous value itself",
    handler: ({ scope, key }, ctx) =>
      sql.transaction(() => {
        const old = read(scope, key);
        if (old === undefined) return undefined;
        const held = holderOf(scope, key);
        sql.exec("DELETE FROM state WHERE scope = ? AND key = ?", scope, key);
        // A delete frees the value's quota, whoever deletes it.
        if (held) account(held.principal, -1, -held.charge);
        fires("state:deleted", scope, key, old, null, ctx);
        return old;
      }),
  });
  defineBuiltin(core, "state::update", {
    description:
      "Apply update ops (set, increment, decrement, remove, merge, append) atomically; `expected` makes it a compare-and-set; with `enqueue`, a queue message stored in the same transaction",
    handler: (input, ctx) => {
      const { scope, key, ops } = input;
      const prepared = prepareEnqueue(input.enqueue, ctx);
      return sql.transaction(() => {
        const old = read(scope, key);
        // Compare-and-set: two steps touching one record cannot both win (the read and the write are
        // one synchronous step of the object, so nothing runs between them). A conflict throws out
        // of the transaction: nothing is written, no fire, no message.
        if ("expected" in input && !sameJson(old ?? null, input.expected ?? null)) {
          throw new IIIError("state_conflict", `${scope}/${key} is not the expected value; read it again and retry`);
        }
        const { value, errors } = applyUpdateOps(old, ops);
        write(scope, key, value, "update_error", ctx);
        fires(old === undefined ? "state:created" : "state:updated", scope, key, old, value, ctx);
        const out: StateUpdateOutput = { old_value: old ?? null, new_value: value };
        if (errors.length > 0) out.errors = errors;
        if (prepared) out.messageReceiptId = queues.commitPrepared(prepared);
        return out;
      });
    },
  });
  const listing = stateListing(sql);
  defineBuiltin(core, "state::list", {
    description: `Values in a scope, in key order: all of them (at most ${MAX_LIST_PAGE}, within one result), or a page with {limit, offset}`,
    handler: ({ scope, limit, offset }) => listing.values(scope, { limit, offset }),
  });
  defineBuiltin(core, "state::list_keys", {
    description:
      "Keys in a scope, sorted (iii-edge): a page ({scope, limit, offset}) with total and next_offset, in the same order as state::list",
    handler: ({ scope, limit, offset }) => {
      const page = listing.keys(scope, { limit, offset });
      const out: { keys: string[]; total: number; next_offset?: number } = { keys: page.items, total: page.total };
      if (page.next_offset !== undefined) out.next_offset = page.next_offset;
      return out;
    },
  });
  defineBuiltin(core, "state::list_groups", {
    description: "Scopes that hold a value, sorted; a page ({limit, offset}) with total and next_offset",
    handler: (q) => {
      const page = listing.groups(q);
      const out: { groups: string[]; total: number; next_offset?: number } = { groups: page.items, total: page.total };
      if (page.next_offset !== undefined) out.next_offset = page.next_offset;
      return out;
    },
  });

  core.addTriggerType({
    id: TRIGGER_TYPES.state,
    description: "Fires on state:created, state:updated and state:deleted, optionally filtered by scope and key",
    validate(config) {
      const r = stateTriggerConfig.safeParse(config);
      return r.success ? undefined : `invalid config: ${formatIssues(r.error)}`;
    },
  });
}
