// The telemetry built-ins, with iii v0.23's names and shapes (@iii-edge/protocol/telemetry):
// engine::traces::list|tree|group_by|clear, engine::logs::list, engine::metrics::list. They are
// internal (hidden from default listings) and never traced themselves (telemetry.ts UNTRACED).
// Each reads after this object's pending spans are flushed; other objects' spans appear once they
// flush (within FLUSH_INTERVAL_MS).
import type { EngineApi } from "../api.ts";
import { defineBuiltin } from "../builtins/define.ts";
import type { D1Like } from "../queues/dead-letters.ts";
import { buildTree } from "./store.ts";
import type { Telemetry } from "./telemetry.ts";

export function installTelemetry(core: EngineApi, t: Telemetry, db?: D1Like): void {
  const internal = true;
  defineBuiltin(core, "engine::traces::list", {
    internal,
    description: "Spans, newest first, filtered by trace, service, name, status, session, function and time",
    handler: async (q) => (await t.settled()).list(q),
  });
  defineBuiltin(core, "engine::traces::tree", {
    internal,
    description: "One trace as a tree of spans ({roots})",
    handler: async (q) => ({ roots: buildTree(await (await t.settled()).spansOf(q.trace_id)) }),
  });
  defineBuiltin(core, "engine::traces::group_by", {
    internal,
    description: "Spans grouped by an attribute (iii.session.id, iii.function_id, …) or a field, with counts and durations",
    handler: async (q) => (await t.settled()).groupBy(q),
  });
  defineBuiltin(core, "engine::traces::clear", {
    internal,
    description: "Delete this namespace's stored spans and logs",
    handler: async () => {
      await (await t.settled()).clear();
      return { success: true as const };
    },
  });
  defineBuiltin(core, "engine::logs::list", {
    internal,
    description: "Log records, newest first, by trace, span, service, severity and time",
    handler: async (q) => (await t.settled()).logs(q),
  });
  defineBuiltin(core, "engine::metrics::list", {
    internal,
    description:
      "The engine's current metrics (iii.invocations.total, iii.invocation.duration, queue depth, DLQ size, open calls, connections) and workers' latest",
    handler: (q) => t.metrics.list(q.name),
  });

  const m = t.metrics;
  const { sql, namespace } = core.ports;
  m.gauge("iii.connections", "Worker connections open on this namespace's engine", () => core.catalog.workers.size);
  m.gauge("iii.invocations.open", "Calls routed to workers and not answered yet", () => {
    let n = 0;
    for (const w of core.catalog.workers.keys()) n += core.introspection.activeInvocations(w);
    return n;
  });
  m.gauge("iii.queue.depth", "Messages waiting in durable queues (Cloudflare Queues' depth is the platform's)", () =>
    sql
      .exec<{ queue: string; n: number }>("SELECT queue, COUNT(*) AS n FROM queue_messages GROUP BY queue")
      .map((r) => ({ attributes: { "messaging.destination.name": r.queue }, value: r.n })),
  );
  m.gauge("iii.queue.dlq.size", "Dead letters kept, by queue", async () => {
    const rows = db
      ? (
          await db
            .prepare("SELECT queue, COUNT(*) AS n FROM dead_letters WHERE namespace = ? GROUP BY queue")
            .bind(namespace)
            .all<{ queue: string; n: number }>()
        ).results
      : sql.exec<{ queue: string; n: number }>("SELECT queue, COUNT(*) AS n FROM local_dead_letters GROUP BY queue");
    return rows.map((r) => ({ attributes: { "messaging.destination.name": r.queue }, value: r.n }));
  });
}
