// The spans of each hop the engine makes, with their OpenTelemetry semantic-convention attributes
// (`rpc.*`, `faas.*`, `messaging.*`, `http.*`) and iii's where there are none (`iii.function_id`,
// `iii.worker.id`, `iii.namespace`). The core calls one of these at each hop and passes on the
// span's `traceparent`; each returns undefined when nothing is recorded (tracing off, an unsampled
// trace, a telemetry reader), and the caller then passes on what it was given.
import type { Attributes } from "@iii-edge/protocol/telemetry";
import type { CallRequest } from "../api.ts";
import type { CallOutcome } from "../ports.ts";
import type { ActiveSpan, Telemetry } from "./telemetry.ts";
import { isRecord } from "@iii-edge/protocol";

/** Where a called function lives, as the invoke span records it. */
export interface InvokeTarget {
  kind: "builtin" | "worker" | "edge" | "http" | "missing";
  /** The worker connection or edge host that runs it. */
  owner?: string;
}

/** A session id a call is about: the payload's `session_id` (the harness's own calls), else the
 * metadata's (a call a model made carries who called there, its payload being the model's), else
 * baggage's. */
function sessionOf(data: unknown, metadata: unknown, baggage: string | undefined): string | undefined {
  if (isRecord(data) && typeof data.session_id === "string") return data.session_id;
  if (isRecord(metadata) && typeof metadata.session_id === "string") return metadata.session_id;
  if (baggage?.includes("session")) {
    for (const part of baggage.split(",")) {
      const [k, v] = part.split("=", 2);
      const key = k?.trim();
      if ((key === "session_id" || key === "iii.session.id") && v) {
        const raw = v.split(";")[0]!.trim();
        try {
          return decodeURIComponent(raw);
        } catch {
          return raw; // a malformed escape: kept as written, never thrown on the call path
        }
      }
    }
  }
  return undefined;
}

/** A call (routed to a worker, Worker-hosted, HTTP-invoked, or a built-in such as a state write). */
export function invokeSpan(t: Telemetry, req: CallRequest, target: InvokeTarget): ActiveSpan | undefined {
  if (!t.tracing || t.untraced(req.function_id)) return undefined;
  const a: Attributes = {
    "rpc.system": "iii",
    "rpc.method": req.function_id,
    "faas.invoked_name": req.function_id,
    "iii.function_id": req.function_id,
    "iii.function.kind": target.kind,
  };
  if (target.owner) a[target.kind === "edge" ? "iii.edge_host" : "iii.worker.id"] = target.owner;
  if (req.callerWorkerId) a["iii.caller.worker_id"] = req.callerWorkerId;
  if (req.invocationId) a["iii.invocation_id"] = req.invocationId;
  const session = sessionOf(req.data, req.metadata, req.baggage);
  if (session) a["iii.session.id"] = session;
  if (req.function_id.startsWith("state::") && isRecord(req.data)) {
    if (typeof req.data.scope === "string") a["iii.state.scope"] = req.data.scope;
    if (typeof req.data.key === "string") a["iii.state.key"] = req.data.key;
  }
  return t.start(`invoke ${req.function_id}`, {
    parent: req.traceparent,
    kind: target.kind === "builtin" ? "internal" : "client",
    attributes: a,
  });
}

/** `faas.trigger` of an iii trigger type (OTel's values: http, pubsub, datasource, timer, other). */
function faasTrigger(type: string): string {
  if (type === "http") return "http";
  if (type === "cron") return "timer";
  if (type === "state" || type.startsWith("stream")) return "datasource";
  if (type === "subscribe" || type === "queue" || type === "durable:subscriber") return "pubsub";
  return "other";
}

/** A trigger binding fired (its condition and its function are children of this span). */
export function fireSpan(
  t: Telemetry,
  binding: { id: string; trigger_type: string; function_id: string },
  parent: string | undefined,
): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`trigger ${binding.trigger_type}`, {
    parent,
    kind: "internal",
    attributes: {
      "faas.trigger": faasTrigger(binding.trigger_type),
      "iii.trigger.id": binding.id,
      "iii.trigger.type": binding.trigger_type,
      "iii.function_id": binding.function_id,
    },
  });
}

/** One discovery change told to every subscriber of its type: one span for the whole fan-out (the
 * subscribers' handlers are its children), not one per subscriber. */
export function discoverySpan(t: Telemetry, triggerType: string, subscribers: number): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`trigger ${triggerType}`, {
    kind: "internal",
    attributes: { "faas.trigger": "other", "iii.trigger.type": triggerType, "iii.discovery.subscribers": subscribers },
  });
}

/** Ends a fire's span: "skipped" (its condition said no) is no error. */
export function endFire(span: ActiveSpan | undefined, out: CallOutcome | "skipped"): void {
  if (!span) return;
  if (out === "skipped") span.set("iii.trigger.skipped", true).end({ ok: true });
  else span.end(out);
}

/** The `enqueue` action (a producer span; the message carries its context to the delivery). */
export function enqueueSpan(t: Telemetry, req: { queue: string; function_id: string; traceparent?: string }): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`enqueue ${req.queue}`, {
    parent: req.traceparent,
    kind: "producer",
    attributes: {
      "messaging.system": "iii",
      "messaging.operation.type": "send",
      "messaging.destination.name": req.queue,
      "iii.function_id": req.function_id,
    },
  });
}

export function endEnqueue(span: ActiveSpan | undefined, out: CallOutcome): void {
  if (!span) return;
  if (out.ok && isRecord(out.result) && typeof out.result.messageReceiptId === "string")
    span.set("messaging.message.id", out.result.messageReceiptId);
  span.end(out);
}

/** One delivery attempt of a queued message (a consumer span, child of its enqueue). */
export function deliverySpan(
  t: Telemetry,
  m: { queue: string; id: string; function_id: string; attempt: number; traceparent?: string | null; backend: "durable" | "cloudflare" },
): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`deliver ${m.queue}`, {
    parent: m.traceparent ?? undefined,
    kind: "consumer",
    attributes: {
      "messaging.system": "iii",
      "messaging.operation.type": "process",
      "messaging.destination.name": m.queue,
      "messaging.message.id": m.id,
      "messaging.message.delivery_attempt": m.attempt,
      "iii.queue.backend": m.backend,
      "iii.function_id": m.function_id,
    },
  });
}

/** Ends a delivery's span with what became of the message: delivered, retried, dead-lettered. */
export function endDelivery(span: ActiveSpan | undefined, out: CallOutcome, verdict: "delivered" | "retry" | "dead" | "duplicate"): void {
  if (!span) return;
  span.set("iii.queue.outcome", verdict);
  if (verdict === "retry") span.event("retry");
  if (verdict === "dead") span.event("dead_letter");
  span.end(out);
}

/** A call into another namespace (DO → DO by RPC): its engine's spans are children of this one. */
export function remoteSpan(t: Telemetry, f: { function_id: string; traceparent?: string }, namespace: string): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`invoke ${f.function_id}`, {
    parent: f.traceparent,
    kind: "client",
    attributes: {
      "rpc.system": "iii",
      "rpc.method": f.function_id,
      "iii.function_id": f.function_id,
      "iii.function.kind": "namespace",
      "iii.target.namespace": namespace,
    },
  });
}

/** An HTTP request on a trigger route (a server span continuing the caller's `traceparent`). */
export function httpServerSpan(
  t: Telemetry,
  r: { method: string; path: string; route: string; traceparent?: string },
): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start(`${r.method} /${r.route.replace(/^\/+/, "")}`, {
    parent: r.traceparent,
    kind: "server",
    attributes: { "http.request.method": r.method, "url.path": r.path, "http.route": `/${r.route.replace(/^\/+/, "")}` },
  });
}

export function endHttpServer(span: ActiveSpan | undefined, status: number): void {
  if (!span) return;
  span.set("http.response.status_code", status);
  if (status >= 500) span.markError(`HTTP ${status}`);
  span.end({ ok: true });
}

/** A channel from its creation to its close. */
export function channelSpan(t: Telemetry, id: string, parent: string | undefined): ActiveSpan | undefined {
  if (!t.tracing) return undefined;
  return t.start("channel", { parent, kind: "internal", attributes: { "iii.channel.id": id } });
}
