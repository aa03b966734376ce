// The queue built-ins (protocol/README.md §7.1 "Queue worker"): enqueue, topics and their stats,
// dead letters (list, redrive, redrive one, discard), all on top of the router (router.ts).
// Inputs and results: protocol's BUILTINS.
import { IIIError, enqueueReceipt } from "@iii-edge/protocol";
import { defineBuiltin } from "../builtins/define.ts";
import type { EngineApi, EnqueueRequest } from "../api.ts";
import type { QueueRouter } from "./router.ts";

export function installQueueBuiltins(core: EngineApi, router: QueueRouter): void {
  defineBuiltin(core, "engine::queue::enqueue", {
    description: "Enqueue {queue, function_id, data, idempotency_key?}; returns {messageReceiptId}",
    handler: async (q, ctx) => {
      const req: EnqueueRequest = { queue: q.queue, function_id: q.function_id, data: q.data ?? null };
      if (ctx.principal !== undefined) req.principal = ctx.principal;
      if (q.idempotency_key) req.idempotency_key = q.idempotency_key;
      // Every delivery runs in the enqueuer's trace (§4.8).
      if (ctx.traceparent) req.traceparent = ctx.traceparent;
      if (ctx.baggage) req.baggage = ctx.baggage;
      const out = await router.enqueue(req);
      if (!out.ok) throw IIIError.relayed(out.error);
      // The provider's outcome carries its result untyped: read as what an enqueue answers.
      const receipt = enqueueReceipt.safeParse(out.result);
      if (!receipt.success) throw new IIIError("enqueue_error", "the queue answered without a message receipt");
      return receipt.data;
    },
  });
  defineBuiltin(core, "engine::queue::list_topics", {
    description: "Configured queues with their backend and what is waiting in the durable backend",
    handler: () => {
      const stats = new Map(router.durable.stats().map((s) => [s.queue, s]));
      const names = new Set([...router.queueNames(), ...stats.keys()]);
      return {
        topics: [...names].sort().map((name) => {
          const cfg = router.config(name);
          return {
            name,
            backend: cfg?.backend ?? null,
            type: cfg?.type ?? null,
            depth: stats.get(name)?.depth ?? 0,
            inflight: stats.get(name)?.inflight ?? 0,
          };
        }),
      };
    },
  });
  defineBuiltin(core, "engine::queue::topic_stats", {
    description: "Configuration and durable depth of one queue",
    handler: ({ topic }) => {
      const cfg = router.config(topic);
      if (!cfg) throw new IIIError("not_found", `queue '${topic}' is not configured`);
      return { topic, config: cfg, depth: router.durable.depth(topic) };
    },
  });
  defineBuiltin(core, "engine::queue::dlq_topics", {
    description: "Queues that hold dead letters, with counts",
    handler: async () => ({ topics: (await router.deadLetters.topics()).map((t) => ({ topic: t.queue, count: t.count })) }),
  });
  defineBuiltin(core, "engine::queue::dlq_messages", {
    description: "Dead letters of one queue ({topic, offset?, limit?}): payload, attempts and last error",
    handler: async (q) => {
      const topic = q.topic ?? q.queue;
      if (!topic) throw new IIIError("deserialization_error", "topic: required");
      const messages = await router.deadLetters.messages(topic, q.offset, q.limit);
      return { topic, messages: messages.map((m) => ({ message_id: m.id, ...m })) };
    },
  });
  defineBuiltin(core, "iii::queue::status", {
    description: "One queue's status ({queue}): messages pending and in flight, and dead letters (iii's dlq_count)",
    handler: async ({ queue }) => {
      const cfg = router.config(queue);
      const stats = router.durable.stats().find((s) => s.queue === queue);
      const dlq = (await router.deadLetters.topics()).find((t) => t.queue === queue)?.count ?? 0;
      // A name nobody configured and nothing ever used is most likely a typo: say so rather than
      // answer zeros that look like an idle queue.
      if (!cfg && !stats && dlq === 0)
        throw new IIIError(
          "not_found",
          `queue '${queue}' is not configured and holds nothing (engine::queue::list_topics lists the queues)`,
        );
      return { queue, backend: cfg?.backend ?? null, pending: stats?.depth ?? 0, inflight: stats?.inflight ?? 0, dlq_count: dlq };
    },
  });
  defineBuiltin(core, "iii::queue::redrive", {
    description: "Re-enqueue every dead letter of a queue ({queue}); returns {queue, redriven}",
    handler: async ({ queue }) => {
      return { queue, redriven: await router.redrive(queue) };
    },
  });
  defineBuiltin(core, "iii::queue::redrive_message", {
    description: "Re-enqueue one dead letter ({queue, message_id})",
    handler: async ({ queue, message_id }) => {
      await router.redrive(queue, message_id);
      return { queue, message_id, redriven: true as const };
    },
  });
  defineBuiltin(core, "iii::queue::discard_message", {
    description: "Drop one dead letter for good ({queue, message_id})",
    handler: async ({ queue, message_id }) => {
      if (!(await router.deadLetters.remove(queue, message_id)))
        throw new IIIError("not_found", `no dead letter ${message_id} in queue '${queue}'`);
      return { queue, message_id, discarded: true as const };
    },
  });
}
