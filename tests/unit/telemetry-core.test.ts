// The telemetry core in plain Node (engine-do/src/core/telemetry): the engine core over Node's own
// SQLite, its trace store over a D1-shaped adaptor of a real SQLite database with the repo's D1
// migrations applied, and a real OTLP/HTTP receiver. Covers what the end-to-end suite cannot
// reach quickly: retention (oldest first, by age, count and bytes), sampling and the switch,
// decoding the frames iii-sdk 0.22.1 really sends (captured, tests/node/fixtures), the untraced
// readers, a cross-namespace hop, a cron fire, and the exporter's bounded buffer and failures.
import { readFileSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RpcTriggerRequest } from "@iii-edge/protocol";
import type { LogRecord, Span, TracesListOutput } from "@iii-edge/protocol/telemetry";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import type { D1Like, D1StatementLike } from "@iii-edge/engine-do/core/queues/dead-letters.ts";
import { decodeFrame, decodeLogs, decodeMetrics, decodeSpans, encodeLogs, encodeSpans } from "@iii-edge/engine-do/core/telemetry/otlp.ts";
import { EXPORT_ATTEMPTS, EXPORT_BATCH, type ExportFetch, MAX_EXPORT_BUFFER } from "@iii-edge/engine-do/core/telemetry/exporter.ts";
import { FLUSH_SPANS } from "@iii-edge/engine-do/core/telemetry/telemetry.ts";
import type { TelemetryVars } from "@iii-edge/engine-do/core/telemetry/config.ts";
import { nodeD1, nodePorts, RecordingConn, trackedTimers } from "@iii-edge/test-support/node-sql";
import { repoRoot } from "@iii-edge/test-support/engine-server";
import { startOtlpReceiver, type OtlpReceiver } from "@iii-edge/test-support/otlp-receiver";
import { until } from "@iii-edge/test-support/wait";

const d1 = () => nodeD1();

const handles = new Set<ReturnType<typeof setTimeout>>();
afterEach(() => {
  handles.forEach((h) => clearTimeout(h));
  handles.clear();
});

function engine(
  opts: {
    vars?: TelemetryVars;
    db?: D1Like;
    namespace?: string;
    now?: () => number;
    others?: Record<string, EngineCore>;
    queues?: string;
    /** Where the engine's warnings go. */
    warnings?: { msg: string; fields?: Record<string, unknown> }[];
    /** The exporter's fetch (default: the global one). */
    fetch?: ExportFetch;
  } = {},
) {
  const ports: EnginePorts = nodePorts(new DatabaseSync(":memory:"), {
    namespace: opts.namespace ?? "default",
    clock: { now: opts.now ?? (() => Date.now()) },
    timers: trackedTimers(handles),
    log: { info: () => {}, warn: (msg, fields) => void opts.warnings?.push({ msg, fields }) },
    otherNamespace: (ns) => ({
      trigger: (req: RpcTriggerRequest) =>
        opts.others![ns]!.invokeFrom({
          function_id: req.function_id,
          data: req.payload ?? null,
          traceparent: req.traceparent,
          baggage: req.baggage,
        }),
      telemetry: async () => {},
    }),
  });
  const core = new EngineCore(ports, {
    telemetry: { vars: { TRACING: "on", ...opts.vars }, db: opts.db ?? d1(), fetch: opts.fetch ?? ((url, init) => fetch(url, init)) },
  });
  installEngine(core, opts.queues ? { QUEUES: opts.queues } : {});
  core.start([]);
  return core;
}

async function list(core: EngineCore, q: Record<string, unknown>): Promise<TracesListOutput> {
  const out = await core.invoke({ function_id: "engine::traces::list", data: q });
  if (!out.ok) throw new Error(out.error.message);
  return out.result as TracesListOutput;
}

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;

describe("decoding what iii-sdk 0.22.1 sends on /otel (captured frames)", () => {
  const captured = JSON.parse(readFileSync(path.join(repoRoot, "tests/node/fixtures/iii-sdk-otel-frames.json"), "utf8")) as {
    frames: { signal: string; frame: string }[];
  };
  const frame = (signal: string) => new TextEncoder().encode(captured.frames.find((f) => f.signal === signal)!.frame).buffer;

  it("reads the 4-byte prefix and the OTLP/JSON after it: spans, logs, metrics", () => {
    const t = decodeFrame(frame("OTLP"))!;
    expect(t.signal).toBe("traces");
    const [span] = decodeSpans(t.body);
    expect(span).toMatchObject({
      trace_id: TRACE,
      parent_span_id: "00f067aa0ba902b7",
      name: "execute cap::fn",
      kind: "internal",
      status: "ok",
      service_name: "iii-node",
    });
    expect(span!.events.map((e) => e.name)).toEqual(["iii.invocation.input", "iii.invocation.output"]);
    expect(span!.end_time_unix_nano).toBeGreaterThan(span!.start_time_unix_nano);
    const l = decodeFrame(frame("LOGS"))!;
    expect(decodeLogs(l.body)[0]).toMatchObject({
      trace_id: TRACE,
      span_id: span!.span_id,
      body: "hello from cap",
      severity_number: 9,
      attributes: { "log.data": { n: 1 } },
    });
    const m = decodeFrame(frame("MTRC"))!;
    expect(decodeMetrics(m.body).map((p) => p.name)).toContain("iii.worker.memory.heap_used");
  });

  it("drops what is not a telemetry frame, and a hostile body, without throwing", () => {
    expect(decodeFrame("JUNK{}")).toBeUndefined();
    expect(decodeFrame("OTLP{not json")).toBeUndefined();
    expect(decodeSpans({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: "zz", spanId: 1 }, null, 7] }] }] })).toEqual([]);
    let deep: unknown = { stringValue: "x" };
    for (let i = 0; i < 100; i++) deep = { arrayValue: { values: [deep] } };
    const [s] = decodeSpans({
      resourceSpans: [
        { scopeSpans: [{ spans: [{ traceId: TRACE, spanId: "00f067aa0ba902b7", attributes: [{ key: "deep", value: deep }] }] }] },
      ],
    });
    expect(s!.service_name).toBe("unknown_service");
    expect(JSON.stringify(s!.attributes).length).toBeLessThan(200);
  });

  it("stores an ingested frame on the control socket as on /otel; a bad one is counted, not thrown", async () => {
    // The engine's clock stands at the captured span's end: the capture is older than the store's
    // retention (TRACES_MAX_AGE_MS, a day), so on a real clock it would be dropped as expired.
    const [span] = decodeSpans(decodeFrame(frame("OTLP"))!.body);
    const core = engine({ now: () => Math.ceil(span!.end_time_unix_nano / 1e6) });
    const conn = new RecordingConn("w-1");
    core.connect(conn, "tok");
    core.message(conn, frame("OTLP"));
    core.message(conn, new TextEncoder().encode("OTLP{broken").buffer);
    const page = await list(core, { trace_id: TRACE });
    expect(page.spans.map((s) => s.name)).toEqual(["execute cap::fn"]);
    const { metrics } = await core.telemetry.metrics.list("iii.telemetry.frames.refused");
    expect(metrics[0]).toMatchObject({ value: 1 });
  });
});

describe("the tracer", () => {
  it("makes a child span per hop and passes ITS id on; the readers themselves are not traced", async () => {
    const core = engine();
    const target = new RecordingConn("target");
    core.connect(target, "t");
    core.message(target, JSON.stringify({ type: "registerfunction", id: "a::b" }));
    const call = core.invoke({ function_id: "a::b", data: { session_id: "s-1" }, traceparent: PARENT });
    const sent = target.frames.find((f) => f.type === "invokefunction") as { invocation_id: string; traceparent: string };
    expect(sent.traceparent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    const engineSpanId = sent.traceparent.split("-")[2]!;
    expect(engineSpanId).not.toBe("00f067aa0ba902b7");
    core.message(target, JSON.stringify({ type: "invocationresult", invocation_id: sent.invocation_id, function_id: "a::b", result: 1 }));
    await call;
    await list(core, {});
    await list(core, { trace_id: TRACE });
    const page = await list(core, { trace_id: TRACE });
    expect(page.spans).toHaveLength(1);
    expect(page.spans[0]).toMatchObject({
      span_id: engineSpanId,
      parent_span_id: "00f067aa0ba902b7",
      name: "invoke a::b",
      status: "ok",
      service_name: "iii-engine",
    });
    const bySession = await list(core, { session_id: "s-1" });
    expect(bySession.spans.map((s) => s.span_id)).toEqual([engineSpanId]);
    // No span of any engine::traces::* call.
    expect((await list(core, {})).spans.some((s) => s.name.startsWith("invoke engine::traces"))).toBe(false);
  });

  it("takes a session id from baggage, and a malformed one never fails the call", async () => {
    const core = engine();
    const ok = await core.invoke({
      function_id: "engine::functions::list",
      data: {},
      traceparent: PARENT,
      baggage: "session_id=s%202,other=1",
    });
    const bad = await core.invoke({
      function_id: "engine::functions::list",
      data: {},
      traceparent: PARENT,
      baggage: "session_id=%E0%A4%A",
    });
    expect([ok.ok, bad.ok]).toEqual([true, true]);
    expect((await list(core, { session_id: "s 2" })).total).toBe(1);
    expect((await list(core, { session_id: "%E0%A4%A" })).total).toBe(1);
  });

  it("TRACING=off makes no span and passes the caller's traceparent on untouched", async () => {
    const core = engine({ vars: { TRACING: "off" } });
    const target = new RecordingConn("target");
    core.connect(target, "t");
    core.message(target, JSON.stringify({ type: "registerfunction", id: "a::b" }));
    void core.invoke({ function_id: "a::b", data: {}, traceparent: PARENT });
    expect((target.frames.find((f) => f.type === "invokefunction") as { traceparent: string }).traceparent).toBe(PARENT);
    await core.telemetry.flush();
    expect(await core.telemetry.store!.counts()).toEqual({ spans: 0, logs: 0 });
  });

  it("samples the traces it starts at TRACE_SAMPLE_RATIO, and honours an unsampled parent (flags 00)", async () => {
    const core = engine({ vars: { TRACE_SAMPLE_RATIO: "0" } });
    const target = new RecordingConn("target");
    core.connect(target, "t");
    core.message(target, JSON.stringify({ type: "registerfunction", id: "a::b" }));
    void core.invoke({ function_id: "a::b", data: {} });
    const unsampled = `00-${TRACE}-00f067aa0ba902b7-00`;
    void core.invoke({ function_id: "a::b", data: {}, traceparent: unsampled });
    const sent = target.frames.filter((f) => f.type === "invokefunction") as { traceparent: string }[];
    // Not sampled at the root: the hops after it are told so (flags 00).
    expect(sent[0]!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(sent[1]!.traceparent).toBe(unsampled);
    await core.telemetry.flush();
    expect((await core.telemetry.store!.counts()).spans).toBe(0);
    // A sampled parent is still recorded at ratio 0 (parent-based).
    await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: PARENT });
    await core.telemetry.flush();
    expect((await core.telemetry.store!.counts()).spans).toBe(1);
  });

  it("records at most TRACE_RATE_LIMIT new traces a second: the rest go on unsampled and are counted; a sampled parent always records", async () => {
    let now = 1_700_000_000_000;
    const core = engine({ vars: { TRACE_RATE_LIMIT: "5" }, now: () => now });
    const target = new RecordingConn("target");
    core.connect(target, "t");
    core.message(target, JSON.stringify({ type: "registerfunction", id: "a::b" }));
    const sent = () => (target.frames.filter((f) => f.type === "invokefunction") as { traceparent: string }[]).map((f) => f.traceparent);
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 8; i++) calls.push(core.invoke({ function_id: "a::b", data: {} }));
    // A second's worth at once, then the bucket is empty: the hops after a limited root are told (flags 00).
    expect(sent().map((t) => t.slice(-2))).toEqual(["01", "01", "01", "01", "01", "00", "00", "00"]);
    const limited = (await core.telemetry.metrics.list("iii.telemetry.traces.rate_limited")).metrics[0];
    expect(limited?.type === "counter" && limited.value).toBe(3);
    // Still empty, a trace that arrives sampled is recorded (parent-based).
    await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: PARENT });
    // 400 ms later two tokens have come back (5 a second).
    now += 400;
    for (let i = 0; i < 3; i++) calls.push(core.invoke({ function_id: "a::b", data: {} }));
    expect(
      sent()
        .slice(8)
        .map((t) => t.slice(-2)),
    ).toEqual(["01", "01", "00"]);
    // Answered, the recorded calls end: 5 + 2 invoke spans, and the sampled parent's one.
    for (const f of target.frames.filter((f) => f.type === "invokefunction") as { invocation_id: string }[]) {
      core.message(target, JSON.stringify({ type: "invocationresult", invocation_id: f.invocation_id, function_id: "a::b", result: 1 }));
    }
    await Promise.all(calls);
    await core.telemetry.flush();
    expect((await core.telemetry.store!.counts()).spans).toBe(8);
  });

  it("a cross-namespace call is a client span whose child is the other namespace's invoke", async () => {
    const db = d1();
    const other = engine({ db, namespace: "b" });
    const a = engine({ db, namespace: "a", others: { b: other } });
    const worker = new RecordingConn("caller");
    a.connect(worker, "t");
    a.message(
      worker,
      JSON.stringify({
        type: "invokefunction",
        invocation_id: "x1",
        function_id: "engine::functions::list",
        namespace: "b",
        data: {},
        traceparent: PARENT,
      }),
    );
    await until(() => worker.frames.some((f) => f.type === "invocationresult"), "the remote result");
    await other.telemetry.flush();
    const spans = (await list(a, { trace_id: TRACE })).spans;
    const client = spans.find((s) => s.attributes["iii.target.namespace"] === "b")!;
    expect(client).toMatchObject({ kind: "client", parent_span_id: "00f067aa0ba902b7", attributes: { "iii.namespace": "a" } });
    const remote = spans.find((s) => s.attributes["iii.namespace"] === "b")!;
    expect(remote).toMatchObject({ name: "invoke engine::functions::list", parent_span_id: client.span_id });
  });

  it("a cron fire starts a trace: the fire span is its root (no dangling parent), the call its child", async () => {
    const core = engine();
    const w = new RecordingConn("w");
    core.connect(w, "t");
    core.message(w, JSON.stringify({ type: "registerfunction", id: "tick::fn" }));
    const binding = { id: "cron-1", trigger_type: "cron", function_id: "tick::fn", config: {}, owner: "w", status: "active" } as Parameters<
      EngineCore["fire"]
    >[0];
    // As the cron scheduler fires an occurrence: with tracing on, no traceparent (the fire is the root).
    const fired = core.fire(binding, {}, {});
    const sent = w.frames.find((f) => f.type === "invokefunction") as { invocation_id: string };
    core.message(
      w,
      JSON.stringify({
        type: "invocationresult",
        invocation_id: sent.invocation_id,
        function_id: "tick::fn",
        error: { code: "invocation_failed", message: "nope" },
      }),
    );
    await fired;
    const root = (await list(core, { name: "trigger cron" })).spans[0]!;
    expect(root.parent_span_id).toBeUndefined();
    const spans = (await list(core, { trace_id: root.trace_id })).spans;
    const fire = spans.find((s) => s.name === "trigger cron")!;
    expect(fire.attributes).toMatchObject({ "faas.trigger": "timer", "iii.trigger.id": "cron-1" });
    const call = spans.find((s) => s.name === "invoke tick::fn")!;
    expect(call.parent_span_id).toBe(fire.span_id);
    expect([fire.status, call.status]).toEqual(["error", "error"]);
    expect(call.events[0]).toMatchObject({
      name: "exception",
      attributes: { "exception.type": "invocation_failed", "exception.message": "nope" },
    });
  });
});

describe("queue hops and channels", () => {
  it("each delivery attempt is a consumer span under the enqueue: retried, then dead-lettered", async () => {
    const core = engine({ queues: JSON.stringify({ flaky: { backend: "durable", max_retries: 1, backoff_ms: 5 } }) });
    const w = new RecordingConn("w");
    core.connect(w, "t");
    core.message(w, JSON.stringify({ type: "registerfunction", id: "q::fails" }));
    // The worker answers every call with an error, when it arrives.
    // (Every attempt has the message's id as its invocation id: frames are answered by position.)
    let seen = 0;
    const answer = () => {
      for (const f of w.frames.slice(seen)) {
        seen++;
        if (f.type !== "invokefunction") continue;
        core.message(
          w,
          JSON.stringify({
            type: "invocationresult",
            invocation_id: f.invocation_id,
            function_id: "q::fails",
            error: { code: "invocation_failed", message: "no" },
          }),
        );
      }
    };
    const trace = "77".repeat(16);
    const out = await core.enqueue({ queue: "flaky", function_id: "q::fails", data: {}, traceparent: `00-${trace}-${"88".repeat(8)}-01` });
    expect(out.ok).toBe(true);
    const spans = await until(async () => {
      answer();
      await core.alarm();
      const page = await list(core, { trace_id: trace });
      return page.spans.filter((s) => s.name === "deliver flaky").length === 2 ? page.spans : undefined;
    }, "two delivery attempts");
    const enqueue = spans.find((s) => s.name === "enqueue flaky")!;
    expect(enqueue).toMatchObject({ kind: "producer", parent_span_id: "88".repeat(8) });
    const attempts = spans
      .filter((s) => s.name === "deliver flaky")
      .sort(
        (a, b) => Number(a.attributes["messaging.message.delivery_attempt"]) - Number(b.attributes["messaging.message.delivery_attempt"]),
      );
    expect(
      attempts.map((a) => [
        a.attributes["messaging.message.delivery_attempt"],
        a.attributes["iii.queue.outcome"],
        a.status,
        a.parent_span_id,
      ]),
    ).toEqual([
      [1, "retry", "error", enqueue.span_id],
      [2, "dead", "error", enqueue.span_id],
    ]);
    expect(attempts.map((a) => a.events.map((e) => e.name))).toEqual([
      ["retry", "exception"],
      ["dead_letter", "exception"],
    ]);
    // Each attempt's call is the attempt's child.
    for (const a of attempts) expect(spans.some((s) => s.name === "invoke q::fails" && s.parent_span_id === a.span_id)).toBe(true);
  });

  it("a channel is a span from engine::channels::create to its end", async () => {
    const now = { t: Date.now() };
    const core = engine({ now: () => now.t });
    const trace = "99".repeat(16);
    const created = await core.invoke({
      function_id: "engine::channels::create",
      data: {},
      traceparent: `00-${trace}-${"aa".repeat(8)}-01`,
    });
    expect(created.ok).toBe(true);
    // Neither end attached: the sweep removes it after its TTL.
    now.t += 6 * 60_000;
    await core.alarm();
    const spans = (await list(core, { trace_id: trace })).spans;
    const create = spans.find((s) => s.name === "invoke engine::channels::create")!;
    const channel = spans.find((s) => s.name === "channel")!;
    expect(channel.parent_span_id).toBe(create.span_id);
    expect(channel.attributes["iii.channel.end"]).toBe("channel_expired");
    expect(channel.end_time_unix_nano - channel.start_time_unix_nano).toBeGreaterThanOrEqual(6 * 60_000 * 1e6);
  });
});

describe("retention: oldest first, by age, count and bytes", () => {
  function spansAt(n: number, startMs: number, stepMs: number, attrBytes = 10): Span[] {
    return Array.from({ length: n }, (_, i) => ({
      trace_id: TRACE,
      span_id: (i + 1).toString(16).padStart(16, "0"),
      name: `s${i}`,
      start_time_unix_nano: (startMs + i * stepMs) * 1e6,
      end_time_unix_nano: (startMs + i * stepMs + 1) * 1e6,
      status: "ok" as const,
      attributes: { pad: "x".repeat(attrBytes) },
      service_name: "test",
      events: [],
    }));
  }

  it("drops past TRACES_MAX_SPANS the oldest spans", async () => {
    const now = 1_800_000_000_000;
    const core = engine({ vars: { TRACES_MAX_SPANS: "50" }, now: () => now });
    await core.telemetry.store!.writeSpans(spansAt(80, now - 80_000, 1_000));
    await core.telemetry.prune();
    const left = (await list(core, { trace_id: TRACE, limit: 1000 })).spans.map((s) => s.name);
    expect(left).toHaveLength(50);
    // The newest 50 (s30…s79) stay.
    expect(left).toContain("s79");
    expect(left).toContain("s30");
    expect(left).not.toContain("s29");
  });

  it("drops spans older than TRACES_MAX_AGE_MS", async () => {
    const now = 1_800_000_000_000;
    const core = engine({ vars: { TRACES_MAX_AGE_MS: "10000" }, now: () => now });
    await core.telemetry.store!.writeSpans(spansAt(20, now - 19_500, 1_000));
    await core.telemetry.prune();
    const left = (await list(core, { trace_id: TRACE, limit: 1000 })).spans.map((s) => s.name);
    // s0 started 19.5 s ago … s19 0.5 s ago: those started within the last 10 s stay.
    expect(left.sort()).toEqual(Array.from({ length: 10 }, (_, i) => `s${i + 10}`).sort());
  });

  it("drops past TRACES_MAX_BYTES the oldest spans until the rest fits", async () => {
    const now = 1_800_000_000_000;
    const core = engine({ vars: { TRACES_MAX_BYTES: "20000" }, now: () => now });
    // ~1.1 KB each: about 18 fit in 20 000 bytes.
    await core.telemetry.store!.writeSpans(spansAt(40, now - 40_000, 1_000, 1_000));
    await core.telemetry.prune();
    const left = (await list(core, { trace_id: TRACE, limit: 1000 })).spans.map((s) => s.name);
    expect(left.length).toBeGreaterThan(10);
    expect(left.length).toBeLessThan(20);
    expect(left).toContain("s39");
    expect(left).not.toContain("s0");
    const oldestLeft = Math.min(...left.map((n) => Number(n.slice(1))));
    expect(left).toHaveLength(40 - oldestLeft);
  });
});

describe("the store's writes", () => {
  const span = (i: number, extra: Partial<Span> = {}): Span => ({
    trace_id: "ab".repeat(16),
    span_id: (i + 1).toString(16).padStart(16, "0"),
    name: `w${i}`,
    start_time_unix_nano: (1_800_000_000_000 + i) * 1e6,
    end_time_unix_nano: (1_800_000_000_000 + i + 2) * 1e6,
    status: "ok",
    attributes: { "iii.function_id": "demo::f", quote: 'a "b" \\ c', n: i, ok: true },
    service_name: "test",
    events: [{ name: "exception", time_unix_nano: (1_800_000_000_000 + i + 1) * 1e6, attributes: { "exception.message": "boom" } }],
    ...extra,
  });

  it("a SQLite without jsonb_each (before 3.51) gets the same rows through json_each", async () => {
    const inner = d1();
    const refused: string[] = [];
    // As an older SQLite answers: the JSONB statement is refused, everything else goes through.
    const old: D1Like = {
      prepare: (q) => {
        if (q.includes("jsonb_each")) {
          refused.push(q);
          const fail: D1StatementLike = {
            bind: () => fail,
            run: () => Promise.reject(new Error("D1_ERROR: no such function: jsonb_each: SQLITE_ERROR")),
            all: () => Promise.reject(new Error("no such function: jsonb_each")),
          };
          return fail;
        }
        return inner.prepare(q);
      },
    };
    const withJsonb = engine({ db: inner });
    const without = engine({ db: old });
    await withJsonb.telemetry.store!.writeSpans([
      span(0),
      span(1, { status: "error", status_message: "it failed", parent_span_id: "1".padStart(16, "0") }),
    ]);
    await without.telemetry.store!.writeSpans([span(2)]);
    await without.telemetry.store!.writeSpans([span(3)]);
    expect(refused).toHaveLength(1); // asked once, then remembered
    const got = (await list(withJsonb, { trace_id: "ab".repeat(16), limit: 10 })).spans.sort((a, b) => a.name.localeCompare(b.name));
    expect(got.map((s) => s.name)).toEqual(["w0", "w1", "w2", "w3"]);
    for (const [i, s] of got.entries()) {
      expect(s.attributes).toEqual({ "iii.function_id": "demo::f", quote: 'a "b" \\ c', n: i, ok: true });
      expect(s.events).toEqual(span(i).events);
      expect(Math.round((s.end_time_unix_nano - s.start_time_unix_nano) / 1e6)).toBe(2); // ms (nanoseconds this large are not exact in a double)
    }
    expect(got[1]).toMatchObject({ status: "error", status_message: "it failed", parent_span_id: "1".padStart(16, "0") });
    const fn = (await list(withJsonb, { function_id: "demo::f", limit: 10 })).total;
    expect(fn).toBe(4);
  });

  it("a write the store refuses for another reason is not retried as JSON text", async () => {
    const inner = d1();
    let asked = 0;
    const broken: D1Like = {
      prepare: (q) => {
        if (!q.startsWith("INSERT")) return inner.prepare(q);
        asked++;
        const fail: D1StatementLike = {
          bind: () => fail,
          run: () => Promise.reject(new Error("D1_ERROR: database is locked")),
          all: () => Promise.reject(new Error("locked")),
        };
        return fail;
      },
    };
    const core = engine({ db: broken });
    await expect(core.telemetry.store!.writeSpans([span(0)])).rejects.toThrow(/locked/);
    expect(asked).toBe(1);
  });
});

describe("encoding for export (OTLP/JSON)", () => {
  const hostile = 'quote " backslash \\ newline \n tab \t nul \u0000 emoji 🦀 \u2028';
  const span: Span = {
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: "b7ad6b7169203331",
    parent_span_id: "00f067aa0ba902b7",
    name: `invoke ${hostile}`,
    kind: "client",
    start_time_unix_nano: 1_765_000_000_000_000_000,
    end_time_unix_nano: 1_765_000_001_000_000_000,
    status: "error",
    status_message: hostile,
    attributes: {
      s: hostile,
      i: 42,
      neg: -7,
      d: 1.5,
      big: 2 ** 60,
      t: true,
      f: false,
      n: null,
      list: ["a", 1, false, null, [2]],
      kv: { inner: "x", deeper: { n: 3 } },
      [hostile]: "key with JSON's special characters",
    },
    service_name: "iii-engine",
    events: [{ name: "exception", time_unix_nano: 1_765_000_000_200_000_000, attributes: { "exception.type": "timeout" } }],
  };

  it("writes a span in the proto3 JSON mapping of ExportTraceServiceRequest: field names, enums as numbers, fixed64 as strings, int64 as strings", () => {
    const body = JSON.parse(encodeSpans([span], { "service.namespace": "ns" }));
    const rs = body.resourceSpans[0];
    expect(rs.resource.attributes).toEqual([
      { key: "service.namespace", value: { stringValue: "ns" } },
      { key: "service.name", value: { stringValue: "iii-engine" } },
    ]);
    expect(rs.scopeSpans[0].scope).toEqual({ name: "iii-edge", version: "0.1.0" });
    const out = rs.scopeSpans[0].spans[0];
    expect(out).toMatchObject({
      traceId: span.trace_id,
      spanId: span.span_id,
      parentSpanId: span.parent_span_id,
      name: span.name,
      kind: 3,
      startTimeUnixNano: String(span.start_time_unix_nano),
      endTimeUnixNano: String(span.end_time_unix_nano),
      status: { code: 2, message: hostile },
      events: [
        {
          name: "exception",
          timeUnixNano: "1765000000200000000",
          attributes: [{ key: "exception.type", value: { stringValue: "timeout" } }],
        },
      ],
    });
    const attr = Object.fromEntries((out.attributes as { key: string; value: unknown }[]).map((a) => [a.key, a.value]));
    expect(attr).toEqual({
      s: { stringValue: hostile },
      i: { intValue: "42" },
      neg: { intValue: "-7" },
      d: { doubleValue: 1.5 },
      // Past 2^53 an integer is not exact: sent as a double, never as an int64 string in exponent form.
      big: { doubleValue: 2 ** 60 },
      t: { boolValue: true },
      f: { boolValue: false },
      n: {},
      list: {
        arrayValue: {
          values: [{ stringValue: "a" }, { intValue: "1" }, { boolValue: false }, {}, { arrayValue: { values: [{ intValue: "2" }] } }],
        },
      },
      kv: {
        kvlistValue: {
          values: [
            { key: "inner", value: { stringValue: "x" } },
            { key: "deeper", value: { kvlistValue: { values: [{ key: "n", value: { intValue: "3" } }] } } },
          ],
        },
      },
      [hostile]: { stringValue: "key with JSON's special characters" },
    });
    // A root span has no parentSpanId at all; a span without a status message, no message.
    const root = JSON.parse(encodeSpans([{ ...span, parent_span_id: undefined, status: "ok", status_message: undefined }]));
    const r = root.resourceSpans[0].scopeSpans[0].spans[0];
    expect("parentSpanId" in r).toBe(false);
    expect(r.status).toEqual({ code: 1 });
  });

  it("what it writes, the engine's own OTLP decoder reads back as the same spans and logs, one resource per service", () => {
    const worker: Span = { ...span, span_id: "c7ad6b7169203331", service_name: "my-worker", kind: "server", events: [] };
    const decoded = decodeSpans(JSON.parse(encodeSpans([span, worker, { ...span, span_id: "d7ad6b7169203331" }])));
    expect(decoded).toEqual([span, { ...span, span_id: "d7ad6b7169203331" }, worker]);
    const log: LogRecord = {
      trace_id: span.trace_id,
      span_id: span.span_id,
      time_unix_nano: 1_765_000_000_300_000_000,
      severity_number: 17,
      severity_text: "ERROR",
      body: { message: hostile, n: 1 },
      attributes: { "code.function": "handler" },
      service_name: "my-worker",
    };
    const bare: LogRecord = { time_unix_nano: 1, severity_text: "", body: hostile, attributes: {}, service_name: "iii-engine" };
    expect(decodeLogs(JSON.parse(encodeLogs([log, bare])))).toEqual([log, bare]);
  });

  it("a value JSON cannot carry (NaN, Infinity) is sent as an empty value, and the body stays valid JSON", () => {
    const body = encodeSpans([{ ...span, attributes: { nan: Number.NaN, inf: Number.POSITIVE_INFINITY } }]);
    const attrs = JSON.parse(body).resourceSpans[0].scopeSpans[0].spans[0].attributes;
    expect(attrs).toEqual([
      { key: "nan", value: {} },
      { key: "inf", value: {} },
    ]);
  });
});

describe("export", () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(() => receiver.close());

  it("sends finished spans to the collector as OTLP/HTTP JSON", async () => {
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    const trace = "12".repeat(16);
    await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: `00-${trace}-${"34".repeat(8)}-01` });
    await core.telemetry.drainExport();
    const got = receiver.spans.filter((s) => s.trace_id === trace);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({
      name: "invoke engine::functions::list",
      parent_span_id: "34".repeat(8),
      service_name: "iii-engine",
      status_code: 1,
      kind: 1,
    });
    expect(got[0]!.resource["service.namespace"]).toBe("default");
    await until(() => receiver.metrics.some((m) => m.name === "iii.invocation.duration" && m.kind === "histogram"), "the engine's metrics");
  });

  it("TRACE_STORE=off exports every span and keeps none; the readers say where the traces are", async () => {
    const db = d1(); // the binding is there: the var alone decides
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off" }, db });
    const trace = "56".repeat(16);
    await core.invoke({
      function_id: "state::set",
      data: { scope: "s", key: "k", value: 1 },
      traceparent: `00-${trace}-${"78".repeat(8)}-01`,
    });
    await core.telemetry.drainExport();
    expect(receiver.spans.filter((s) => s.trace_id === trace).map((s) => s.name)).toEqual(["invoke state::set"]);
    expect(core.telemetry.store).toBeUndefined();
    const read = await core.invoke({ function_id: "engine::traces::list", data: { trace_id: trace } });
    expect(read).toMatchObject({ ok: false, error: { code: "function_not_invokable" } });
    expect(!read.ok && read.error.message).toContain("TRACE_STORE=off");
  });

  /** A counter of the engine's own metrics (0 when it was never added to). */
  async function counter(core: EngineCore, name: string): Promise<number> {
    const m = (await core.telemetry.metrics.list(name)).metrics[0];
    return m?.type === "counter" ? m.value : 0;
  }

  it("the call whose span fills a flush only appends it for export: encoding and the POST happen later, in the exporter's own timer event", async () => {
    let posts = 0;
    const core = engine({
      vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off", TRACE_RATE_LIMIT: "0" },
      fetch: (url, init) => {
        posts++;
        return fetch(url, init);
      },
    });
    for (let i = 0; i < FLUSH_SPANS - 1; i++) core.telemetry.start("x")!.end();
    expect(core.telemetry.exporter!.buffered).toBe(0);
    // The span that makes FLUSH_SPANS flushes the pipeline in its own event, handing all to the exporter…
    const last = `the ${FLUSH_SPANS}th`;
    core.telemetry.start(last)!.end();
    expect(core.telemetry.exporter!.buffered).toBe(FLUSH_SPANS);
    // …which has encoded nothing and sent nothing yet: that waits for its timer.
    expect(posts).toBe(0);
    await until(() => posts >= 1, "the batch posted from the exporter's timer");
    await core.telemetry.drainExport();
    expect(receiver.spans.filter((s) => s.name === last)).toHaveLength(1);
  });

  it("a collector answering 503 gets the batch again after a backoff, EXPORT_ATTEMPTS tries in all; then it is dropped, counted and logged, never the call's", async () => {
    const warnings: { msg: string; fields?: Record<string, unknown> }[] = [];
    // Real time: the backoffs (1 s, then 2 s) are waited out as deployed, and the 10 s request timeout
    // stays far above what a loopback answer takes on a loaded machine.
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off" }, warnings });
    const from = receiver.requests.length;
    receiver.fail(1_000);
    const trace = "9a".repeat(16);
    const out = await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: `00-${trace}-${"34".repeat(8)}-01` });
    expect(out.ok).toBe(true);
    await core.telemetry.drainExport();
    receiver.fail(0);
    // The span's batch was refused with 503 on every try, tried EXPORT_ATTEMPTS times, then dropped.
    const tries = receiver.requests.slice(from).filter((r) => r.path === "/v1/traces");
    expect(tries.map((r) => r.status)).toEqual(Array(EXPORT_ATTEMPTS).fill(503));
    expect(receiver.spans.filter((s) => s.trace_id === trace)).toHaveLength(0);
    expect(await counter(core, "iii.telemetry.export.failed")).toBeGreaterThanOrEqual(1);
    expect(await counter(core, "iii.telemetry.export.retried")).toBeGreaterThanOrEqual(EXPORT_ATTEMPTS - 1);
    expect(core.telemetry.exporter!.buffered + core.telemetry.exporter!.inFlight).toBe(0);
    // One line says the collector is failing (the counters say how much): not one per batch.
    expect(warnings.filter((w) => w.msg.startsWith("OTLP export failed"))).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({ reason: "HTTP 503" });
  });

  it("a batch refused once with 503 arrives on the retry, once, and nothing is counted failed", async () => {
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off" } });
    receiver.fail(1);
    const trace = "9b".repeat(16);
    await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: `00-${trace}-${"34".repeat(8)}-01` });
    await core.telemetry.drainExport();
    expect(receiver.spans.filter((s) => s.trace_id === trace)).toHaveLength(1);
    expect(await counter(core, "iii.telemetry.export.retried")).toBeGreaterThanOrEqual(1);
    expect(await counter(core, "iii.telemetry.export.failed")).toBe(0);
  });

  it("a refusal OTLP does not call retryable (400) is not sent again: the batch is dropped and counted", async () => {
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off" } });
    const from = receiver.requests.length;
    receiver.fail(1_000, 400);
    await core.invoke({ function_id: "engine::functions::list", data: {}, traceparent: `00-${"9c".repeat(16)}-${"34".repeat(8)}-01` });
    await core.telemetry.drainExport();
    receiver.fail(0);
    expect(
      receiver.requests
        .slice(from)
        .filter((r) => r.path === "/v1/traces")
        .map((r) => r.status),
    ).toEqual([400]);
    expect(await counter(core, "iii.telemetry.export.failed")).toBeGreaterThanOrEqual(1);
    expect(await counter(core, "iii.telemetry.export.retried")).toBe(0);
  });

  it("a collector that is down (nothing listening) costs its batches, counted, and every call is still answered", async () => {
    const closed = await startOtlpReceiver();
    const url = closed.url;
    await closed.close();
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: url, TRACE_STORE: "off", TRACE_RATE_LIMIT: "0" } });
    for (let i = 0; i < 50; i++) {
      const out = await core.invoke({ function_id: "engine::functions::list", data: {} });
      expect(out.ok).toBe(true);
    }
    await core.telemetry.drainExport();
    expect(await counter(core, "iii.telemetry.export.failed")).toBeGreaterThanOrEqual(50);
    expect(await counter(core, "iii.telemetry.export.sent")).toBe(0);
    expect(core.telemetry.exporter!.buffered + core.telemetry.exporter!.inFlight).toBe(0);
  });

  it("a collector that does not answer never holds a call; the buffer stops at MAX_EXPORT_BUFFER and counts what it drops", async () => {
    // No trace rate limit: the overflow below starts more traces at once than the default allows.
    const core = engine({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACE_STORE: "off", TRACE_RATE_LIMIT: "0" } });
    const exporter = core.telemetry.exporter!;
    const sentBefore = receiver.spans.length;
    const from = receiver.requests.length;
    receiver.stall();
    try {
      // The first span's batch goes out and hangs at the collector.
      await core.invoke({ function_id: "engine::functions::list", data: {} });
      await core.telemetry.flush();
      await until(() => receiver.held("/v1/traces") === 1, "the first batch held at the collector");
      expect(exporter.inFlight).toBeGreaterThanOrEqual(1);
      // Calls go on being answered while it hangs: none waits for the collector.
      for (let i = 0; i < 200; i++) {
        const out = await core.invoke({ function_id: "engine::functions::list", data: {} });
        expect(out.ok).toBe(true);
      }
      // More than the buffer holds: it stops at its bound and counts the rest, exactly.
      const extra = MAX_EXPORT_BUFFER + 1_000;
      for (let i = 0; i < extra; i++) core.telemetry.start("x")!.end();
      await core.telemetry.flush();
      expect(exporter.buffered).toBe(MAX_EXPORT_BUFFER);
      expect(await counter(core, "iii.telemetry.export.dropped")).toBe(200 + extra - MAX_EXPORT_BUFFER);
      // The pipeline's own bound was never reached: the export buffer is what dropped.
      expect(await counter(core, "iii.telemetry.spans.dropped")).toBe(0);
      // Still one traces request at a time.
      expect(receiver.held("/v1/traces")).toBe(1);
    } finally {
      receiver.release();
    }
    // Once the collector answers, everything kept arrives, in batches of at most EXPORT_BATCH.
    await core.telemetry.drainExport();
    expect(receiver.spans.length - sentBefore).toBe(1 + MAX_EXPORT_BUFFER);
    expect(await counter(core, "iii.telemetry.export.sent")).toBeGreaterThanOrEqual(1 + MAX_EXPORT_BUFFER);
    // The first span's request, then the buffer in full batches.
    const traceRequests = receiver.requests.slice(from).filter((r) => r.path === "/v1/traces");
    expect(traceRequests).toHaveLength(1 + Math.ceil(MAX_EXPORT_BUFFER / EXPORT_BATCH));
    expect(traceRequests.every((r) => r.status === 200)).toBe(true);
  });
});
