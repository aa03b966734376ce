// The workers' tracer (sdk-edge/src/telemetry.ts) through the Node worker surface, against a real
// WebSocket server standing in for the engine: a handler's span is parented to the invocation's
// traceparent, a call made inside it carries it as the parent, and the span and a correlated log
// arrive as binary `OTLP`/`LOGS` frames (OTLP/JSON) on the control socket.
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { createTracer, parseTraceparent, MAX_BUFFERED_SPANS, type TelemetryTransport } from "@iii-edge/sdk-edge/telemetry";
import { tracerOf, type WorkerModule } from "@iii-edge/sdk-edge/worker";
import { until } from "@iii-edge/test-support/wait";

interface Engine {
  url: string;
  text: Record<string, unknown>[];
  binary: string[];
  socket(): WebSocket;
  close(): Promise<void>;
}

async function startEngine(): Promise<Engine> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((r) => server.once("listening", () => r()));
  const text: Record<string, unknown>[] = [];
  const binary: string[] = [];
  let last: WebSocket | undefined;
  server.on("connection", (ws) => {
    last = ws;
    ws.send(JSON.stringify({ type: "workerregistered", worker_id: "w-1" }));
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) binary.push(data.toString("utf8"));
      else text.push(JSON.parse(data.toString("utf8")) as Record<string, unknown>);
    });
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    text,
    binary,
    socket: () => last!,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  status: { code: number; message?: string };
  events: { name: string }[];
};

const spansOf = (frames: string[]): OtlpSpan[] =>
  frames
    .filter((f) => f.startsWith("OTLP"))
    .flatMap((f) =>
      (JSON.parse(f.slice(4)) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((r) =>
        r.scopeSpans.flatMap((s) => s.spans),
      ),
    );
const attr = (s: { attributes: { key: string; value: Record<string, unknown> }[] }, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v ? Object.values(v)[0] : undefined;
};

let engine: Engine | undefined;
let running: RunningWorkers | undefined;
afterEach(async () => {
  await running?.shutdown();
  await engine?.close();
  running = engine = undefined;
});

describe("the Node worker surface's tracer", () => {
  it("parents a handler's span to its invocation, passes it on to calls, and sends spans and logs on the control socket", async () => {
    engine = await startEngine();
    const mod: WorkerModule = {
      name: "orders",
      register(iii) {
        iii.registerFunction("orders::place", async (_data, ctx) => {
          const tracer = tracerOf(iii);
          return tracer.withSpan("place order", { attributes: { "order.items": 2 } }, async (span) => {
            tracer.log("info", "placing", { "order.id": "o-1" });
            void ctx.trigger({ function_id: "stock::reserve", payload: {}, timeoutMs: 1000 }).catch(() => undefined);
            span.addEvent("reserved");
            return { ok: true };
          });
        });
      },
    };
    running = runWorkers(engine.url, [mod], { heartbeat: false, logger: { warn: () => {}, error: () => {} } });
    await until(() => engine!.text.some((f) => f.type === "registerfunction"), "the registration");
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    engine
      .socket()
      .send(JSON.stringify({ type: "invokefunction", function_id: "orders::place", invocation_id: "i-1", data: {}, traceparent: tp }));

    const call = await until(
      () => engine!.text.find((f) => f.type === "invokefunction" && f.function_id === "stock::reserve"),
      "the call made inside the span",
    );
    const [span] = await until(() => {
      const s = spansOf(engine!.binary).filter((x) => x.name === "place order");
      return s.length > 0 ? s : undefined;
    }, "the span frame");
    // The span continues the caller's trace, under the caller's span; the call is its child.
    expect(span).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      parentSpanId: "00f067aa0ba902b7",
      kind: 1,
      status: { code: 0 },
    });
    expect(attr(span, "order.items")).toBe("2");
    expect(span.events.map((e) => e.name)).toEqual(["reserved"]);
    expect(parseTraceparent(call.traceparent as string)).toMatchObject({
      trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
      span_id: span.spanId,
    });
    // The log went out correlated with the span, and the resource names the worker.
    const logFrame = await until(() => engine!.binary.find((f) => f.startsWith("LOGS")), "the log frame");
    const logs = JSON.parse(logFrame.slice(4)) as {
      resourceLogs: {
        resource: { attributes: { key: string; value: { stringValue?: string } }[] };
        scopeLogs: { logRecords: { traceId: string; spanId: string; severityText: string; body: { stringValue: string } }[] }[];
      }[];
    };
    const rl = logs.resourceLogs[0]!;
    expect(rl.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue).toBe("orders");
    expect(rl.scopeLogs[0]!.logRecords[0]).toMatchObject({
      traceId: span.traceId,
      spanId: span.spanId,
      severityText: "INFO",
      body: { stringValue: "placing" },
    });
    // The handler's answer still came back as a text frame.
    await until(() => engine!.text.some((f) => f.type === "invocationresult" && f.invocation_id === "i-1"), "the result");
  });

  it("records a throw as an exception event and error status", async () => {
    const frames: string[] = [];
    const store = { run: <T>(_f: unknown, fn: () => T) => fn(), get: () => undefined };
    const tracer = createTracer({ serviceName: "t", store, transport: (f) => (frames.push(f), true), flush: "manual" });
    await expect(
      tracer.withSpan("boom", {}, () => Promise.reject(Object.assign(new Error("no stock"), { code: "out_of_stock" }))),
    ).rejects.toThrow("no stock");
    await tracer.flush();
    const [s] = spansOf(frames);
    expect(s).toMatchObject({ name: "boom", status: { code: 2, message: "no stock" } });
    expect(s!.parentSpanId).toBeUndefined();
    expect(s!.events[0]!.name).toBe("exception");
  });

  it("keeps what the transport cannot take, within a bound, and counts what it drops", async () => {
    let open = false;
    const sent: string[] = [];
    const transport: TelemetryTransport = (f) => (open ? (sent.push(f), true) : false);
    const store = { run: <T>(_f: unknown, fn: () => T) => fn(), get: () => undefined };
    const tracer = createTracer({ serviceName: "t", store, transport, flush: "manual" });
    for (let i = 0; i < MAX_BUFFERED_SPANS + 10; i++) tracer.startSpan(`s${i}`).end();
    await tracer.flush();
    expect(sent).toEqual([]);
    expect(tracer.dropped.spans).toBe(10);
    open = true;
    await tracer.flush();
    const names = spansOf(sent).map((s) => s.name);
    expect(names).toHaveLength(MAX_BUFFERED_SPANS);
    // The oldest went first.
    expect(names[0]).toBe("s10");
  });

  it("does not record a span whose parent was not sampled (or when off), but still propagates it", async () => {
    const frames: string[] = [];
    const store = { run: <T>(_f: unknown, fn: () => T) => fn(), get: () => undefined };
    const tracer = createTracer({ serviceName: "t", store, transport: (f) => (frames.push(f), true), flush: "manual" });
    const span = tracer.startSpan("quiet", { parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" });
    expect(span.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
    span.end();
    await tracer.flush();
    expect(frames).toEqual([]);
    // A tracer that is off (the engine's TRACING=off) keeps nothing, but passes the flag on as given.
    const off = createTracer({ serviceName: "t", store, transport: (f) => (frames.push(f), true), flush: "manual", enabled: false });
    const kept = off.startSpan("off", { parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    expect(kept.traceparent).toMatch(/-01$/);
    kept.end();
    off.log("info", "nothing");
    await off.flush();
    expect(frames).toEqual([]);
    expect(parseTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBeUndefined();
    expect(parseTraceparent("garbage")).toBeUndefined();
  });
});
