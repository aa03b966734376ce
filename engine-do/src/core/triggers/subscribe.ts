// The `subscribe` trigger type (protocol/README.md §8.4): config {topic}; payload = the published
// data; no metadata, no condition, fire-and-forget, in the publisher's trace. A binding with an empty topic is kept, never fired.
import { TRIGGER_TYPES } from "@iii-edge/protocol";
import type { EngineApi } from "../api.ts";
import { traceOf, type TraceContext } from "../trace.ts";
import { endFire, fireSpan } from "../telemetry/hops.ts";

export function installSubscribe(core: EngineApi): { publish(topic: string, data: unknown, trace?: TraceContext): number } {
  core.addTriggerType({
    id: TRIGGER_TYPES.subscribe,
    description: "Receives every message published to its topic ({topic}); payload is the published data",
    validate(config) {
      if (config === null || config === undefined) return undefined;
      if (typeof config !== "object" || Array.isArray(config)) return "config must be {topic}";
      const topic = (config as { topic?: unknown }).topic;
      if (topic !== undefined && typeof topic !== "string") return "topic must be a string";
      return undefined;
    },
  });
  return {
    publish(topic, data, trace) {
      let n = 0;
      for (const b of core.activeBindings(TRIGGER_TYPES.subscribe)) {
        if ((b.config as { topic?: string } | null)?.topic !== topic) continue;
        if (!core.functionExists(b.function_id)) continue;
        n++;
        // In the publisher's trace (§4.8), under the fire's span (telemetry/hops.ts).
        const span = fireSpan(core.telemetry, b, trace?.traceparent);
        const tc = traceOf(span ? { ...trace, traceparent: span.traceparent } : trace);
        core.ports.background(core.invoke({ function_id: b.function_id, data, ...tc }).then((o) => endFire(span, o)));
      }
      return n;
    },
  };
}
