// state::* (protocol/README.md §7.2) on the object's SQLite, and the `state` trigger type (§8.3).
// Inputs and results: protocol's BUILTINS.
import { IIIError, MAX_LIST_PAGE, MAX_VALUE_BYTES, TRIGGER_TYPES, exceedsJsonDepth, jsonDepthMessage, stateTriggerConfig, type ErrorCode, type StateEventType, type UpdateOutput } from "@iii-edge/protocol";
import type { EngineApi } from "../api.ts";
import { applyUpdateOps } from "../update-ops.ts";
import { defineBuiltin } from "./define.ts";
import { stateListing } from "./state-list.ts";

/** JSON text with object keys sorted, so equal values compare equal whatever their key order. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  );
}
const sameJson = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

export function installState(core: EngineApi): void {
  const { sql } = core.ports;
  sql.exec("CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (scope, key))");

  const read = (scope: string, key: string): unknown => {
    const row = sql.exec<{ value: string }>("SELECT value FROM state WHERE scope = ? AND key = ?", scope, key)[0];
    return row ? JSON.parse(row.value) : undefined;
  };
  const write = (scope: string, key: string, value: unknown, code: ErrorCode) => {
    // A value nested deeper than MAX_JSON_DEPTH could be stored but not read back (a recursive
    // serialiser on the way out overflows the stack): refused before it is stored.
    if (exceedsJsonDepth(value)) throw new IIIError("invalid_input", jsonDepthMessage("value"));
    const text = JSON.stringify(value ?? null);
    if (text.length > MAX_VALUE_BYTES) throw new IIIError("value_too_large", `value of ${text.length} bytes exceeds ${MAX_VALUE_BYTES}`);
    try {
      sql.exec("INSERT OR REPLACE INTO state (scope, key, value) VALUES (?, ?, ?)", scope, key, text);
    } catch (e) {
      throw new IIIError(code, `could not store ${scope}/${key}: ${String(e)}`);
    }
  };

  /** state triggers run in the background, one after another, after the write is durable. */
  const notify = (event_type: StateEventType, scope: string, key: string, old_value: unknown, new_value: unknown) => {
    const bindings = core.activeBindings(TRIGGER_TYPES.state).filter((b) => {
      const c = (b.config ?? {}) as { scope?: string; key?: string };
      return (c.scope === undefined || c.scope === scope) && (c.key === undefined || c.key === key);
    });
    if (bindings.length === 0) return;
    const payload = { type: "state", event_type, scope, key, old_value: old_value ?? null, new_value: new_value ?? null };
    core.ports.background(
      (async () => {
        for (const b of bindings) await core.fire(b, payload);
      })(),
    );
  };

  defineBuiltin(core, "state::set", {
    description: "Store a JSON value under scope/key; returns {old_value, new_value}",
    handler: ({ scope, key, value, data }) => {
      const next = value !== undefined ? value : data;
      const old = read(scope, key);
      write(scope, key, next, "set_error");
      notify(old === undefined ? "state:created" : "state:updated", scope, key, old, next);
      return { old_value: old ?? null, new_value: next ?? null };
    },
  });
  defineBuiltin(core, "state::get", {
    description: "Read scope/key; no result when absent",
    handler: ({ scope, key }) => read(scope, key),
  });
  defineBuiltin(core, "state::delete", {
    description: "Delete scope/key; returns the previous value itself",
    handler: ({ scope, key }) => {
      const old = read(scope, key);
      if (old === undefined) return undefined;
      sql.exec("DELETE FROM state WHERE scope = ? AND key = ?", scope, key);
      notify("state:deleted", scope, key, old, null);
      return old;
    },
  });
  defineBuiltin(core, "state::update", {
    description: "Apply update ops (set, increment, decrement, remove, merge, append) atomically",
    handler: (input) => {
      const { scope, key, ops } = input;
      const old = read(scope, key);
      // Compare-and-set: two steps touching one record cannot both win (the read and the write are
      // one synchronous step of the object, so nothing runs between them).
      if ("expected" in input && !sameJson(old ?? null, input.expected ?? null)) {
        throw new IIIError("state_conflict", `${scope}/${key} is not the expected value; read it again and retry`);
      }
      const { value, errors } = applyUpdateOps(old, ops);
      write(scope, key, value, "update_error");
      notify(old === undefined ? "state:created" : "state:updated", scope, key, old, value);
      const out: UpdateOutput = { old_value: old ?? null, new_value: value };
      if (errors.length > 0) out.errors = errors;
      return out;
    },
  });
  const listing = stateListing(sql);
  defineBuiltin(core, "state::list", {
    description: `Values in a scope, in key order: all of them (at most ${MAX_LIST_PAGE}, within one result), or a page with {limit, offset}`,
    handler: ({ scope, limit, offset }) => listing.values(scope, { limit, offset }),
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
      return r.success ? undefined : `invalid config: ${r.error.issues[0]?.message ?? "bad shape"}`;
    },
  });
}
