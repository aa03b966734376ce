// The `durable:subscriber` trigger type (protocol/README.md §8.5): config {topic,
// condition_function_id?, queue_config?: {maxRetries|max_retries, backoffDelayMs|backoff_ms}}.
// `iii::durable::publish` enqueues one message per distinct subscribed function on the durable
// queue `durable:<topic>` (so dead letters are listed under that name and redriven to it). The
// condition function, if any, is checked at publish time with the published data.
import { TRIGGER_TYPES } from "@iii-edge/protocol";
import type { TriggerRecord } from "../catalog.ts";
import type { EngineApi } from "../api.ts";
import { DURABLE_TOPIC_PREFIX } from "../queues/config.ts";
import type { MessageOverrides } from "../queues/durable-queue.ts";
import type { QueueRouter } from "../queues/router.ts";
import { traceOf, type TraceContext } from "../trace.ts";

interface QueueConfigIn {
  maxRetries?: unknown;
  max_retries?: unknown;
  backoffDelayMs?: unknown;
  backoff_ms?: unknown;
}
const int = (v: unknown, min: number, max: number): number | undefined =>
  typeof v === "number" && Number.isInteger(v) && v >= min && v <= max ? v : undefined;

function overridesOf(b: TriggerRecord): MessageOverrides {
  const qc = ((b.config ?? {}) as { queue_config?: QueueConfigIn }).queue_config ?? {};
  const o: MessageOverrides = {};
  const r = int(qc.maxRetries ?? qc.max_retries, 0, 100);
  const d = int(qc.backoffDelayMs ?? qc.backoff_ms, 0, 3_600_000);
  if (r !== undefined) o.max_retries = r;
  if (d !== undefined) o.backoff_ms = d;
  return o;
}

export function installDurableSubscriber(
  core: EngineApi,
  queues: QueueRouter,
): { publish(topic: string, data: unknown, trace?: TraceContext): Promise<string[]> } {
  core.addTriggerType({
    id: TRIGGER_TYPES.durableSubscriber,
    description: "Durable fan-out: every subscribed function gets each message of its topic, with retries and dead letters",
    validate(config) {
      if (!config || typeof config !== "object" || Array.isArray(config))
        return "config must be {topic, condition_function_id?, queue_config?}";
      const c = config as { topic?: unknown; condition_function_id?: unknown; queue_config?: unknown };
      if (typeof c.topic !== "string" || !c.topic) return "topic is required";
      if (c.condition_function_id !== undefined && typeof c.condition_function_id !== "string")
        return "condition_function_id must be a string";
      if (c.queue_config !== undefined) {
        if (!c.queue_config || typeof c.queue_config !== "object") return "queue_config must be an object";
        const q = c.queue_config as QueueConfigIn;
        const r = q.maxRetries ?? q.max_retries;
        const d = q.backoffDelayMs ?? q.backoff_ms;
        if (r !== undefined && int(r, 0, 100) === undefined) return "queue_config.maxRetries must be an integer 0..100";
        if (d !== undefined && int(d, 0, 3_600_000) === undefined) return "queue_config.backoffDelayMs must be an integer 0..3600000";
      }
      return undefined;
    },
  });
  return {
    async publish(topic, data, trace) {
      const tc = traceOf(trace);
      const byFunction = new Map<string, TriggerRecord>();
      for (const b of core.activeBindings(TRIGGER_TYPES.durableSubscriber)) {
        if ((b.config as { topic?: string }).topic === topic && !byFunction.has(b.function_id)) byFunction.set(b.function_id, b);
      }
      const ids: string[] = [];
      for (const b of byFunction.values()) {
        const cond = (b.config as { condition_function_id?: string }).condition_function_id;
        if (cond) {
          const c = await core.invoke({ function_id: cond, data, ...tc });
          if (!c.ok || c.result === false) continue;
        }
        // Every delivery of the message runs in the publisher's trace (§4.8).
        const req: Parameters<QueueRouter["enqueueWith"]>[0] = {
          queue: `${DURABLE_TOPIC_PREFIX}${topic}`,
          function_id: b.function_id,
          data,
          ...tc,
        };
        const out = await queues.enqueueWith(req, { overrides: overridesOf(b) });
        if (!out.ok) throw Object.assign(new Error(out.error.message), { code: out.error.code });
        ids.push((out.result as { messageReceiptId: string }).messageReceiptId);
      }
      return ids;
    },
  };
}
