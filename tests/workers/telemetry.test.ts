// Telemetry on workerd (engine-do/src/core/telemetry): the trace store on workerd's own D1 — the
// batched json_each insert, the queries and retention as D1 runs them (node:sqlite stands in for
// it in tests/unit/telemetry-core.test.ts), what a batch costs — and the Engine's telemetry() RPC.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Span } from "@iii-edge/protocol/telemetry";
import type { CallOutcome } from "@iii-edge/protocol";
import { TraceStore, buildTree } from "@iii-edge/engine-do/core/telemetry/store.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
function spans(n: number, startMs: number): Span[] {
  return Array.from({ length: n }, (_, i) => ({
    trace_id: TRACE,
    span_id: (i + 1).toString(16).padStart(16, "0"),
    ...(i > 0 ? { parent_span_id: "0000000000000001" } : {}),
    name: `invoke fn::${i % 10}`,
    kind: "client" as const,
    start_time_unix_nano: (startMs + i) * 1e6,
    end_time_unix_nano: (startMs + i + 1) * 1e6,
    status: i % 7 === 0 ? ("error" as const) : ("ok" as const),
    attributes: {
      "iii.function_id": `fn::${i % 10}`,
      "rpc.system": "iii",
      "iii.namespace": "default",
      ...(i % 3 === 0 ? { "iii.session.id": "s-1" } : {}),
    },
    service_name: "iii-engine",
    events: [],
  }));
}

describe("the trace store on D1", () => {
  it("writes a batch in one statement per chunk, and reads it back by trace, filter and tree", async () => {
    const store = new TraceStore(env.DB, "default");
    const now = Date.now();
    const t0 = performance.now();
    await store.writeSpans(spans(2000, now - 10_000));
    const ms = performance.now() - t0;
    console.log(`D1 write of 2000 spans: ${ms.toFixed(1)} ms (${((ms * 1000) / 2000).toFixed(1)} µs/span)`);
    const page = await store.list({ trace_id: TRACE, limit: 10 });
    expect(page.total).toBe(2000);
    expect(page.spans[0]!.name).toBe("invoke fn::9");
    expect(
      (await store.list({ function_id: "fn::3", status: "error" })).spans.every(
        (s) => s.attributes["iii.function_id"] === "fn::3" && s.status === "error",
      ),
    ).toBe(true);
    expect((await store.list({ session_id: "s-1" })).total).toBe(667);
    const roots = buildTree(await store.spansOf(TRACE));
    expect(roots).toHaveLength(1);
    expect(roots[0]!.children).toHaveLength(1999);
    const { groups } = await store.groupBy({ attribute: "iii.function_id" });
    expect(groups).toHaveLength(10);
    expect(groups.find((g) => g.value === "fn::0")).toMatchObject({ span_count: 200, trace_ids: [TRACE] });
    await store.prune(now, { maxAgeMs: 3_600_000, maxSpans: 500, maxBytes: 1 << 30 });
    expect((await store.counts()).spans).toBe(500);
    expect((await store.list({ trace_id: TRACE, limit: 1000 })).spans.at(-1)!.span_id).toBe((1501).toString(16).padStart(16, "0"));
  });
});

describe("telemetry by RPC (Worker-hosted code, no socket)", () => {
  const frame = (prefix: string, body: unknown) => new TextEncoder().encode(prefix + JSON.stringify(body)).buffer as ArrayBuffer;
  const resource = { attributes: [{ key: "service.name", value: { stringValue: "edge-host" } }] };
  const traceId = "0af7651916cd43dd8448eb211c80319c";

  it("stores the spans and logs of an `OTLP` / `LOGS` frame sent to Engine.telemetry()", async () => {
    const engine = env.ENGINE.getByName("default");
    await engine.telemetry(
      frame("OTLP", {
        resourceSpans: [
          {
            resource,
            scopeSpans: [
              {
                spans: [
                  {
                    traceId,
                    spanId: "b7ad6b7169203331",
                    name: "execute edge::fn",
                    kind: 2,
                    startTimeUnixNano: "1800000000000000000",
                    endTimeUnixNano: "1800000000001000000",
                    status: { code: 2, message: "boom" },
                  },
                ],
              },
            ],
          },
        ],
      }),
    );
    await engine.telemetry(
      `LOGS${JSON.stringify({ resourceLogs: [{ resource, scopeLogs: [{ logRecords: [{ timeUnixNano: "1800000000000500000", severityText: "WARN", severityNumber: 13, body: { stringValue: "careful" }, traceId, spanId: "b7ad6b7169203331" }] }] }] })}`,
    );
    // Not a telemetry frame: dropped and counted, the call does not fail.
    await engine.telemetry("JUNK");
    const spans = (await engine.trigger({ function_id: "engine::traces::list", payload: { trace_id: traceId } })) as CallOutcome;
    expect(spans.ok && (spans.result as { spans: Span[] }).spans[0]).toMatchObject({
      name: "execute edge::fn",
      kind: "server",
      status: "error",
      status_message: "boom",
      service_name: "edge-host",
    });
    const logs = (await engine.trigger({ function_id: "engine::logs::list", payload: { span_id: "b7ad6b7169203331" } })) as CallOutcome;
    expect(logs.ok && (logs.result as { logs: unknown[] }).logs).toEqual([
      expect.objectContaining({ body: "careful", severity_text: "WARN", trace_id: traceId }),
    ]);
    const refused = (await engine.trigger({
      function_id: "engine::metrics::list",
      payload: { name: "iii.telemetry.frames.refused" },
    })) as CallOutcome;
    expect(refused.ok && (refused.result as { metrics: { value: number }[] }).metrics[0]!.value).toBe(1);
  });
});
