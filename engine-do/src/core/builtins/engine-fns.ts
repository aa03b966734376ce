// engine::* introspection functions (protocol/README.md §7.1) and the discovery trigger types (§6).
// Inputs and results: protocol's BUILTINS.
import { IIIError, SERVED_BY_ENGINE, TRIGGER_TYPES, type FunctionDetail, isRecord } from "@iii-edge/protocol";
import type { EngineApi } from "../api.ts";
import { defineBuiltin } from "./define.ts";
import { pageOf, type Page } from "./paging.ts";

const matches = (text: string | undefined, search: string | undefined) =>
  !search || (text ?? "").toLowerCase().includes(search.toLowerCase());

/** A listing's result: iii's `{<key>: [...]}`, plus `total` and (unless last) `next_offset`. */
function listed<K extends string, T>(key: K, page: Page<T>): { [k in K]: T[] } & { total: number; next_offset?: number } {
  const out = { [key]: page.items, total: page.total } as { [k in K]: T[] } & { total: number; next_offset?: number };
  if (page.next_offset !== undefined) out.next_offset = page.next_offset;
  return out;
}

const reportedText = (v: unknown): string | null => (typeof v === "string" ? v : null);

export function installEngineFunctions(core: EngineApi): void {
  const { catalog, introspection: look } = core;

  defineBuiltin(core, "engine::workers::register", {
    description: "A worker describes itself (name, runtime, version, pid, metadata)",
    internal: true,
    handler: (info, ctx) => {
      if (!ctx.callerWorkerId) throw new IIIError("invalid_arguments", "engine::workers::register must be called over a worker connection");
      core.describeWorker(ctx.callerWorkerId, info);
      return { success: true as const };
    },
  });

  defineBuiltin(core, "engine::functions::list", {
    description: "List functions, optionally filtered",
    internal: true,
    handler: (q) => {
      const workers = q.workers ?? (q.worker ? [q.worker] : undefined);
      const functions = look
        .functionSummaries(q.include_internal === true)
        .filter(
          (f) =>
            (!q.prefix || f.function_id.startsWith(q.prefix)) &&
            (!workers || workers.includes(f.worker_name)) &&
            (matches(f.function_id, q.search) || matches(f.description, q.search)),
        );
      return listed("functions", pageOf(functions, q, "engine::functions::list"));
    },
  });

  const detail = (id: string) => {
    const b = look.builtin(id);
    const registered_triggers = [...catalog.triggers.values()]
      .filter((t) => t.function_id === id)
      .map((t) => ({ id: t.id, trigger_type: t.trigger_type, config: t.config, status: t.status }));
    if (b) {
      const out: FunctionDetail = {
        function_id: id,
        worker_name: id.split("::")[0] ?? id,
        description: b.description,
        request_schema: b.request_format,
        response_schema: b.response_format,
        served_by: SERVED_BY_ENGINE,
        registered_triggers,
      };
      const metadata = look.builtinMetadata(id);
      if (metadata) out.metadata = metadata;
      return out;
    }
    const f = catalog.functions.get(id);
    if (!f) return undefined;
    const out: FunctionDetail = { function_id: id, worker_name: look.functionOwnerName(f), kind: f.kind, registered_triggers };
    if (f.description !== undefined) out.description = f.description;
    if (f.request_format !== undefined) out.request_schema = f.request_format;
    if (f.response_format !== undefined) out.response_schema = f.response_format;
    if (f.metadata !== undefined) out.metadata = f.metadata;
    const servedBy = look.servedBy(id);
    if (servedBy !== undefined) out.served_by = servedBy;
    return out;
  };

  defineBuiltin(core, "engine::functions::info", {
    description: "Details of one function ({function_id}) or several ({function_ids}, at most 32)",
    internal: true,
    handler: (q) => {
      if ("function_id" in q) {
        const d = detail(q.function_id);
        if (!d) throw new IIIError("not_found", `Function ${q.function_id} not found`);
        return d;
      }
      return { functions: q.function_ids.map((id) => detail(id) ?? { function_id: id, error: "not_found" as const }) };
    },
  });

  defineBuiltin(core, "engine::workers::list", {
    description: "Connected workers with what they reported about themselves",
    internal: true,
    handler: (q) => {
      const workers = [...catalog.workers.values()]
        .filter((w) => core.isConnected(w.worker_id))
        .map((w) => {
          // What it said about itself, as workersRegisterInput let it through (its texts sanitised).
          const info = w.info;
          const function_count = catalog.countOwnedBy(w.worker_id, "functions");
          return {
            id: w.worker_id,
            name: look.workerName(w.worker_id),
            description: reportedText(info.description),
            version: reportedText(info.version),
            runtime: reportedText(info.runtime),
            os: reportedText(info.os),
            pid: typeof info.pid === "number" ? info.pid : null,
            isolation: reportedText(info.isolation),
            metadata: isRecord(info.metadata) ? info.metadata : null,
            status: "connected" as const,
            function_count,
            connected_at_ms: w.connected_at,
            active_invocations: look.activeInvocations(w.worker_id),
          };
        })
        .filter(
          (w) => (!q.runtime || w.runtime === q.runtime) && (matches(w.name, q.search) || matches(String(w.description ?? ""), q.search)),
        )
        .sort((a, b) => a.connected_at_ms - b.connected_at_ms || (a.id < b.id ? -1 : 1));
      return listed("workers", pageOf(workers, q, "engine::workers::list"));
    },
  });

  defineBuiltin(core, "engine::triggers::list", {
    description: "Trigger types, built-in and worker-provided",
    internal: true,
    handler: (q) => {
      const all = [
        ...[...look.builtinTriggerTypes()].map((t) => ({ id: t.id, worker_name: "engine", description: t.description })),
        ...[...catalog.triggerTypes.values()].map((t) => ({
          id: t.id,
          worker_name: look.workerName(t.owner),
          description: t.description ?? "",
        })),
      ];
      const triggers = all
        .filter((t) => (!q.prefix || t.id.startsWith(q.prefix)) && (matches(t.id, q.search) || matches(t.description, q.search)))
        .filter((t) => q.include_internal || !t.id.startsWith("engine::"))
        .sort((a, b) => (a.id < b.id ? -1 : 1));
      return listed("triggers", pageOf(triggers, q, "engine::triggers::list"));
    },
  });

  defineBuiltin(core, "engine::registered-triggers::list", {
    description: "Trigger bindings (active and parked)",
    internal: true,
    handler: (q) => {
      const registered_triggers = look
        .triggerEntries()
        .filter(
          (t) =>
            (!q.trigger_type || t.trigger_type === q.trigger_type) &&
            (!q.function_id || t.function_id === q.function_id) &&
            (!q.worker || t.worker_name === q.worker) &&
            (q.include_internal || !t.trigger_type.startsWith("engine::")) &&
            (matches(t.function_id, q.search) || matches(t.trigger_type, q.search)),
        );
      return listed("registered_triggers", pageOf(registered_triggers, q, "engine::registered-triggers::list"));
    },
  });

  defineBuiltin(core, "engine::register_trigger", {
    description:
      "Create a trigger binding held by the engine: it ends with the caller's last connection to the namespace unless the caller's grant allows durable_bindings",
    internal: true,
    handler: (q, ctx) => {
      const id = q.id ?? core.ports.newId();
      // Held by the engine, owned by the caller's principal: only it may replace or remove it.
      const err = core.registerTrigger(
        null,
        { id, trigger_type: q.trigger_type, function_id: q.function_id, config: q.config ?? null, metadata: q.metadata },
        ctx.grant,
      );
      if (err) throw IIIError.relayed(err);
      return { id };
    },
  });
  defineBuiltin(core, "engine::unregister_trigger", {
    description: "Remove a trigger binding by id (its maker, or the owner of the function it calls)",
    internal: true,
    handler: (q, ctx) => {
      const t = catalog.triggers.get(q.id);
      if (!t) return { removed: false };
      // The same rule as the `unregistertrigger` frame: its maker, its function's owner, trusted code.
      const refused = core.mayUnbind(t, ctx.callerWorkerId ?? null, ctx.grant);
      if (refused) throw IIIError.relayed(refused);
      return { removed: core.removeTrigger(q.id) };
    },
  });

  defineBuiltin(core, "engine::edge::refresh", {
    description: "Reload the manifests of Worker-hosted functions (service bindings in EDGE_HOSTS)",
    internal: true,
    handler: async () => {
      await core.refreshEdgeHosts();
      return {
        hosts: Object.keys(core.ports.edgeHosts),
        functions: [...catalog.functions.values()]
          .filter((f) => f.kind === "edge")
          .map((f) => f.id)
          .sort(),
      };
    },
  });

  const noConfig = (config: unknown) =>
    config === null || config === undefined || (typeof config === "object" && !Array.isArray(config))
      ? undefined
      : "config must be an object";
  core.addTriggerType({
    id: TRIGGER_TYPES.functionsAvailable,
    description: "Fires with the full function list whenever the set of functions changes (config {delta: true}: only {added, removed})",
    validate: noConfig,
    // It pushes that listing: a maker that may not pull it may not bind it either.
    listing: "engine::functions::list",
  });
  core.addTriggerType({
    id: TRIGGER_TYPES.workersAvailable,
    description: "Fires when a worker connects, disconnects or updates its metadata",
    validate: noConfig,
  });
  core.addTriggerType({
    id: TRIGGER_TYPES.triggersAvailable,
    description:
      "Fires with every trigger binding (as engine::registered-triggers::list lists them) whenever the set of bindings changes (config {delta: true}: only {added, removed})",
    validate: noConfig,
    // It pushes that listing: a maker that may not pull it may not bind it either.
    listing: "engine::registered-triggers::list",
  });
}
