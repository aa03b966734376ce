// Observability end to end (engine side): `npm start`'s engine with export to a local OTLP
// receiver, and a separate iii-sdk 0.22.1 process with its OpenTelemetry on. One call over HTTP
// with a `traceparent` yields one trace: the engine's invoke span continues the caller's, the
// worker's own `execute` span is its child, the handler's state write and enqueue are children of
// that, the queue delivery and the downstream function follow — no orphans — with the worker's log
// correlated, the same spans at the receiver, and metrics readable.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type {
  LogsListOutput,
  MetricsListOutput,
  Span,
  SpanTreeNode,
  TracesGroupByOutput,
  TracesListOutput,
  TracesTreeOutput,
} from "@iii-edge/protocol/telemetry";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { startOtlpReceiver, type OtlpReceiver } from "@iii-edge/test-support/otlp-receiver";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let receiver: OtlpReceiver;
let worker: ChildProcess;
let workerLog = "";

async function call<T>(function_id: string, payload: unknown = {}, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ function_id, payload }),
  });
  const body = (await res.json()) as { result?: T; error?: { code: string; message: string } };
  if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
  return body.result as T;
}

const hex = (n: number) => [...crypto.getRandomValues(new Uint8Array(n / 2))].map((b) => b.toString(16).padStart(2, "0")).join("");

/** Every span of a tree, flattened. */
function flatten(nodes: SpanTreeNode[]): SpanTreeNode[] {
  return nodes.flatMap((n) => [n, ...flatten(n.children)]);
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  engine = await startEngine({
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_HEADERS: "x-collector-key=s3cr%20t" },
  });
  worker = spawn(process.execPath, [path.join(repoRoot, "tests/node/fixtures/otel-worker.mjs")], {
    cwd: repoRoot,
    env: { ...process.env, III_URL: engine.wsUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  worker.stdout?.on("data", (d) => (workerLog += d));
  worker.stderr?.on("data", (d) => (workerLog += d));
  await until(
    async () => {
      const { functions } = await call<{ functions: { function_id: string }[] }>("engine::functions::list", { prefix: "tele::" });
      return functions.length >= 4;
    },
    "the iii-sdk worker's functions",
    30_000,
  );
}, 120_000);

afterAll(async () => {
  worker?.kill("SIGTERM");
  await engine?.stop();
  await receiver?.close();
});

describe("one trace across the engine and an iii-sdk worker", () => {
  const traceId = hex(32);
  const callerSpan = hex(16);
  const key = `k-${hex(8)}`;
  let spans: Span[] = [];

  it("continues the caller's traceparent through the engine, the worker, a state write and a queue hop", async () => {
    const result = await call<{ echoed: string }>("tele::echo", { key }, { traceparent: `00-${traceId}-${callerSpan}-01` });
    expect(result).toEqual({ echoed: key });
    // The downstream function's state write is the last hop; its spans arrive within a flush or two.
    spans = await until(
      async () => {
        const page = await call<TracesListOutput>("engine::traces::list", { trace_id: traceId, limit: 1000 });
        const names = page.spans.map((s) => `${s.service_name}:${s.name}`);
        const want = [
          "iii-engine:invoke tele::echo",
          "tele-worker:execute tele::echo",
          "iii-engine:invoke state::set",
          "iii-engine:enqueue jobs",
          "iii-engine:deliver jobs",
          "iii-engine:invoke tele::sink",
          "tele-worker:execute tele::sink",
        ];
        return want.every((w) => names.includes(w)) && names.filter((n) => n === "iii-engine:invoke state::set").length >= 2
          ? page.spans
          : undefined;
      },
      "every span of the trace",
      20_000,
    );

    const byName = (service: string, name: string) => spans.filter((s) => s.service_name === service && s.name === name);
    const invoke = byName("iii-engine", "invoke tele::echo")[0]!;
    const execute = byName("tele-worker", "execute tele::echo")[0]!;
    // The engine's span continues the caller's; the worker's is the engine span's child.
    expect(invoke.parent_span_id).toBe(callerSpan);
    expect(invoke.kind).toBe("client");
    expect(invoke.attributes).toMatchObject({ "rpc.system": "iii", "iii.function_id": "tele::echo", "iii.function.kind": "worker" });
    expect(execute.parent_span_id).toBe(invoke.span_id);
    // The handler's state write and enqueue are children of the worker's span.
    const writes = byName("iii-engine", "invoke state::set");
    const echoWrite = writes.find((s) => s.attributes["iii.state.scope"] === "tele")!;
    expect(echoWrite.parent_span_id).toBe(execute.span_id);
    expect(echoWrite.attributes["iii.state.key"]).toBe(key);
    const enqueue = byName("iii-engine", "enqueue jobs")[0]!;
    expect(enqueue.kind).toBe("producer");
    expect(enqueue.attributes["messaging.destination.name"]).toBe("jobs");
    // The delivery continues the enqueue (a consumer span), and runs the downstream function.
    const deliver = byName("iii-engine", "deliver jobs")[0]!;
    expect(deliver.kind).toBe("consumer");
    expect(deliver.attributes["messaging.message.delivery_attempt"]).toBe(1);
    expect(deliver.attributes["iii.queue.outcome"]).toBe("delivered");
    const sinkInvoke = byName("iii-engine", "invoke tele::sink")[0]!;
    expect(sinkInvoke.parent_span_id).toBe(deliver.span_id);
    const sinkExecute = byName("tele-worker", "execute tele::sink")[0]!;
    expect(sinkExecute.parent_span_id).toBe(sinkInvoke.span_id);
    const sinkWrite = writes.find((s) => s.attributes["iii.state.scope"] === "tele-sink")!;
    expect(sinkWrite.parent_span_id).toBe(sinkExecute.span_id);
    // The enqueue is a child of the worker's span, the delivery a descendant of the enqueue.
    const ids = new Map(spans.map((s) => [s.span_id, s]));
    let up: Span | undefined = deliver;
    const chain: string[] = [];
    while (up?.parent_span_id && ids.has(up.parent_span_id)) chain.push((up = ids.get(up.parent_span_id))!.name);
    expect(chain).toContain("enqueue jobs");
    expect(chain).toContain("execute tele::echo");
  });

  it("answers the trace as one tree: one root (the caller's child), no orphans", async () => {
    const { roots } = await call<TracesTreeOutput>("engine::traces::tree", { trace_id: traceId });
    expect(roots).toHaveLength(1);
    expect(roots[0]!.name).toBe("invoke tele::echo");
    expect(roots[0]!.parent_span_id).toBe(callerSpan);
    const all = flatten(roots);
    expect(all.length).toBe(spans.length);
    const ids = new Set(all.map((s) => s.span_id));
    for (const s of all) if (s !== roots[0]) expect(ids.has(s.parent_span_id!)).toBe(true);
  });

  it("keeps the worker's log, correlated with its span", async () => {
    const execute = spans.find((s) => s.name === "execute tele::echo")!;
    const logs = await until(async () => {
      const out = await call<LogsListOutput>("engine::logs::list", { trace_id: traceId });
      return out.logs.length > 0 ? out.logs : undefined;
    }, "the worker's log record");
    expect(logs[0]).toMatchObject({ trace_id: traceId, span_id: execute.span_id, body: "echo handling", service_name: "tele-worker" });
    const bySpan = await call<LogsListOutput>("engine::logs::list", { span_id: execute.span_id });
    expect(bySpan.total).toBe(1);
  });

  it("finds the trace by session-less filters: function id, service, status, and groups it", async () => {
    const byFn = await call<TracesListOutput>("engine::traces::list", { function_id: "tele::sink", limit: 10 });
    expect(byFn.spans.some((s) => s.trace_id === traceId)).toBe(true);
    const byService = await call<TracesListOutput>("engine::traces::list", { service_name: "tele-worker", name: "execute", limit: 10 });
    expect(byService.spans.every((s) => s.service_name === "tele-worker" && s.name.includes("execute"))).toBe(true);
    const groups = await call<TracesGroupByOutput>("engine::traces::group_by", { attribute: "iii.function_id" });
    const echo = groups.groups.find((g) => g.value === "tele::echo");
    expect(echo?.trace_ids).toContain(traceId);
    expect(echo!.span_count).toBeGreaterThanOrEqual(2);
  });

  it("exports the same spans to an OTLP/HTTP collector, with the configured headers", async () => {
    const got = await until(
      () => {
        const mine = receiver.spans.filter((s) => s.trace_id === traceId);
        return mine.length >= spans.length ? mine : undefined;
      },
      "the trace at the receiver",
      20_000,
    );
    const ids = new Set(spans.map((s) => s.span_id));
    expect(got.filter((s) => ids.has(s.span_id)).length).toBe(spans.length);
    const invoke = got.find((s) => s.name === "invoke tele::echo")!;
    expect(invoke.parent_span_id).toBe(callerSpan);
    expect(invoke.service_name).toBe("iii-engine");
    expect(invoke.kind).toBe(3); // SPAN_KIND_CLIENT
    expect(receiver.requests.find((r) => r.path === "/v1/traces")?.headers["x-collector-key"]).toBe("s3cr t");
    await until(() => receiver.logs.some((l) => l.trace_id === traceId && l.body === "echo handling"), "the log at the receiver", 20_000);
  });
});

describe("errors, HTTP triggers and metrics", () => {
  it("records a failed call as status error with an exception event", async () => {
    const traceId = hex(32);
    await expect(call("tele::fail", {}, { traceparent: `00-${traceId}-${hex(16)}-01` })).rejects.toThrow(/always fails/);
    const span = await until(
      async () => (await call<TracesListOutput>("engine::traces::list", { trace_id: traceId, name: "invoke tele::fail" })).spans[0],
      "the failed call's span",
    );
    expect(span.status).toBe("error");
    expect(span.status_message).toMatch(/always fails/);
    const ev = span.events.find((e) => e.name === "exception");
    expect(ev?.attributes["exception.message"]).toMatch(/always fails/);
    const errors = await call<TracesListOutput>("engine::traces::list", { status: "error", function_id: "tele::fail" });
    expect(errors.total).toBeGreaterThanOrEqual(1);
  });

  it("continues a traceparent sent to an http trigger route with a server span", async () => {
    const traceId = hex(32);
    const parent = hex(16);
    const res = await fetch(`${engine.url}/tele/hello`, { headers: { traceparent: `00-${traceId}-${parent}-01` } });
    expect(res.status).toBe(200);
    const spans = await until(async () => {
      const page = await call<TracesListOutput>("engine::traces::list", { trace_id: traceId });
      return page.spans.some((s) => s.name === "execute tele::hello") ? page.spans : undefined;
    }, "the route's spans");
    const server = spans.find((s) => s.kind === "server")!;
    expect(server.name).toBe("GET /tele/hello");
    expect(server.parent_span_id).toBe(parent);
    expect(server.attributes["http.response.status_code"]).toBe(200);
    const fire = spans.find((s) => s.name === "trigger http")!;
    expect(fire.parent_span_id).toBe(server.span_id);
    expect(spans.find((s) => s.name === "invoke tele::hello")!.parent_span_id).toBe(fire.span_id);
  });

  it("a Worker-hosted function's call is a client span naming its edge host", async () => {
    const traceId = hex(32);
    const out = await call<{ greeting: string }>("edge::hello", { name: "ada" }, { traceparent: `00-${traceId}-${hex(16)}-01` });
    expect(out.greeting).toMatch(/ada/);
    const span = await until(
      async () => (await call<TracesListOutput>("engine::traces::list", { trace_id: traceId })).spans[0],
      "the edge call's span",
    );
    expect(span).toMatchObject({
      name: "invoke edge::hello",
      kind: "client",
      status: "ok",
      attributes: { "iii.function.kind": "edge", "iii.edge_host": "EDGE_DEMO" },
    });
  });

  it("reads and exports the engine's metrics, and keeps the worker's", async () => {
    const m = await until(
      async () => {
        const out = await call<MetricsListOutput>("engine::metrics::list", {});
        return out.sdk_metrics.some((p) => p.name === "iii.worker.memory.heap_used") ? out : undefined;
      },
      "the worker's metrics",
      20_000,
    );
    const total = m.metrics.find((x) => x.name === "iii.invocations.total");
    expect(total?.type === "counter" && total.value).toBeGreaterThan(3);
    const duration = m.metrics.find((x) => x.name === "iii.invocation.duration");
    expect(duration?.type === "histogram" && duration.count).toBeGreaterThan(3);
    expect(m.metrics.find((x) => x.name === "iii.connections")?.type).toBe("gauge");
    expect(m.metrics.some((x) => x.name === "iii.queue.depth")).toBe(true);
    await until(
      () => receiver.metrics.some((x) => x.name === "iii.invocations.total" && x.service_name === "iii-engine"),
      "the engine's metrics at the receiver",
      30_000,
    );
  });
});
