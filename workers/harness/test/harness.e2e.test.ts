// The harness worker alone against `npm start`'s engine: its HTTP API and `harness::trigger`, with
// a stand-in registering the orchestrator's and approval gate's ids (the real ones are other
// workers). What a client of the API sees: statuses, typed error bodies, and what reached the
// function behind each route, trace baggage included.
import type { FunctionRef } from "@iii-edge/sdk-edge/client";
import { runWorkers, type RunningWorkers, type WorkerModule } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually, until } from "@iii-edge/test-support/wait";
import { baggageValue, worker } from "../src/index.ts";

/** Leave every built-in harness worker out of the deployed Worker: this suite brings its own. */
const HARNESS_DISABLE = "harness,turn-orchestrator,provisioning,providers,auth-credentials,policy,approval-gate,session-storage";

let engine: EngineServer;
let harness: RunningWorkers;
let standIn: RunningWorkers;
const calls: { fn: string; data: Record<string, unknown>; baggage?: string; traceparent?: string }[] = [];
const busy = new Set<string>();
let runStart: FunctionRef | undefined;

const callsTo = (fn: string) => calls.filter((c) => c.fn === fn);
const strip = ({ _caller_worker_id: _, ...rest }: Record<string, unknown>) => rest;

function registerRunStart(): FunctionRef {
  return standIn.client.registerFunction("run::start", (data: Record<string, unknown>, _m, ctx) => {
    calls.push({ fn: "run::start", data: strip(data), baggage: ctx.baggage, traceparent: ctx.traceparent });
    const sid = String(data.session_id);
    if (busy.has(sid)) return { session_id: sid, started: false, reason: "session_busy" };
    busy.add(sid);
    return { session_id: sid, started: true };
  });
}

async function listed(): Promise<string[]> {
  const r = await standIn.client.trigger<unknown, { functions: { function_id: string }[] }>({
    function_id: "engine::functions::list",
    payload: { include_internal: true },
  });
  return r.functions.map((f) => f.function_id);
}

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${engine.url}/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

const turn = (sid: string, extra: Record<string, unknown> = {}) => ({
  session_id: sid,
  message_id: `${sid}-m1`,
  payload: {
    session_id: sid,
    provider: "openai",
    model: "gpt-test",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1 }],
    ...extra,
  },
});

beforeAll(async () => {
  engine = await startEngine({ env: { HARNESS_DISABLE } });
  // runWorkers takes WorkerModule<never>[] (config is per module); a typed module needs the widening cast.
  harness = runWorkers(engine.wsUrl, [worker as WorkerModule<never>]);
  standIn = runWorkers(engine.wsUrl, [], { workerName: "orchestrator-stand-in" });
  const record = (fn: string, answer: (data: Record<string, unknown>) => unknown) =>
    standIn.client.registerFunction(fn, (data: Record<string, unknown>, _m, ctx) => {
      calls.push({ fn, data: strip(data), baggage: ctx.baggage });
      return answer(data);
    });
  record("turn::get_state", (d) =>
    d.session_id === "known" ? { session_id: "known", state: "assistant_streaming", turn_count: 1 } : null,
  );
  record("run::events", (d) => ({ events: [{ item_id: `${String(d.session_id)}-00000002`, data: { type: "turn_start" } }], next: null }));
  record("run::steer", () => ({ ok: true }));
  record("turn::stop", (d) => ({ session_id: d.session_id, stopping: true, state: "assistant_streaming" }));
  await until(
    async () => (await listed()).includes("harness::trigger") && (await listed()).includes("turn::stop"),
    "the harness and the stand-in registered",
  );
  // Routes are bound asynchronously: wait until one answers (400 = the route ran, bad body).
  await eventually(async () => (await post("api/turns", "{")).status === 400, 15_000, "the routes bound");
});

afterAll(async () => {
  await Promise.allSettled([harness?.shutdown(), standIn?.shutdown()]);
  await engine?.stop();
});

describe("POST /api/turns", () => {
  it("503 naming the turn-orchestrator while nobody registers run::start", async () => {
    const res = await post("api/turns", turn("nobody"));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      error: {
        code: "worker_unavailable",
        message: expect.stringContaining("turn-orchestrator"),
        function_id: "run::start",
        worker: "turn-orchestrator",
      },
    });
    runStart = registerRunStart();
    await until(async () => (await listed()).includes("run::start"), "run::start registered");
  });

  it("forwards the payload to run::start unchanged, with session and message ids merged into the caller's baggage", async () => {
    const req = turn("s1");
    const res = await post("api/turns", req, { baggage: "user.id=alice,iii.session.id=spoofed" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(await res.json()).toEqual({ session_id: "s1", started: true });
    const [got] = callsTo("run::start");
    expect(got!.data).toEqual(req.payload);
    expect(baggageValue(got!.baggage, "iii.session.id")).toBe("s1");
    expect(baggageValue(got!.baggage, "iii.message.id")).toBe("s1-m1");
    expect(baggageValue(got!.baggage, "user.id")).toBe("alice");
  });

  it("409 with run::start's answer when the session is busy; nothing else reaches it", async () => {
    const res = await post("api/turns", turn("s1"));
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ session_id: "s1", started: false, reason: "session_busy" });
  });

  it("400 with a typed error for bad JSON, a non-object, and an invalid run::start payload — run::start is not called", async () => {
    const before = callsTo("run::start").length;
    const bad = await post("api/turns", '{"session_id": ');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
    const arr = await post("api/turns", [1, 2]);
    expect(((await arr.json()) as { error: { code: string } }).error.code).toBe("invalid_body");
    const noModel = await post("api/turns", { payload: { session_id: "s2" } });
    expect(noModel.status).toBe(400);
    const body = (await noModel.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_payload");
    expect(body.error.message).toContain("model");
    const slash = await post("api/turns", { payload: { session_id: "a/b", model: "m" } });
    expect(slash.status).toBe(400);
    expect(callsTo("run::start").length).toBe(before);
  });
});

describe("harness::trigger", () => {
  it("continues the caller's trace: same trace id (under the engine's spans), baggage merged; the envelope is HTTP-shaped", async () => {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const res = await standIn.client.trigger({
      function_id: "harness::trigger",
      payload: turn("s3"),
      traceparent,
      baggage: "tenant=acme%20corp",
    });
    expect(res).toEqual({ status_code: 200, headers: { "content-type": "application/json" }, body: { session_id: "s3", started: true } });
    const got = callsTo("run::start").find((c) => c.data.session_id === "s3")!;
    // The same trace; the parent is now a span of the engine's (each hop is a span).
    expect(got.traceparent?.split("-")[1]).toBe(traceparent.split("-")[1]);
    expect(got.traceparent).not.toBe(traceparent);
    expect(baggageValue(got.baggage, "tenant")).toBe("acme corp");
    expect(baggageValue(got.baggage, "iii.session.id")).toBe("s3");
  });

  it("the outer ids win over the payload's for the baggage; the target cannot be chosen", async () => {
    await standIn.client.trigger({
      function_id: "harness::trigger",
      payload: { session_id: "outer", message_id: "mm", function_id: "state::set", payload: { session_id: "s4", model: "m" } },
    });
    const got = callsTo("run::start").find((c) => c.data.session_id === "s4")!;
    expect(baggageValue(got.baggage, "iii.session.id")).toBe("outer");
    expect(baggageValue(got.baggage, "iii.message.id")).toBe("mm");
  });

  it("a malformed request is a 400 envelope, not a thrown error", async () => {
    const res = await standIn.client.trigger<unknown, { status_code: number; body: { error: { code: string } } }>({
      function_id: "harness::trigger",
      payload: { payload: "nope" },
    });
    expect(res.status_code).toBe(400);
    expect(res.body.error.code).toBe("invalid_payload");
  });
});

describe("turn routes", () => {
  it("GET /api/turns/:session_id → turn::get_state; 404 for a session with no turn", async () => {
    const known = await fetch(`${engine.url}/api/turns/known`);
    expect(known.status).toBe(200);
    expect(await known.json()).toEqual({ session_id: "known", state: "assistant_streaming", turn_count: 1 });
    const unknown = await fetch(`${engine.url}/api/turns/unknown`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("session_not_found");
  });

  it("GET …/events passes the resume cursor and limit to run::events; a bad limit is 400", async () => {
    const res = await fetch(`${engine.url}/api/turns/s1/events?after=s1-00000001&limit=50`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ events: [{ item_id: "s1-00000002", data: { type: "turn_start" } }], next: null });
    expect(callsTo("run::events").at(-1)!.data).toEqual({ session_id: "s1", after: "s1-00000001", limit: 50 });
    await fetch(`${engine.url}/api/turns/s1/events`);
    expect(callsTo("run::events").at(-1)!.data).toEqual({ session_id: "s1" });
    const bad = await fetch(`${engine.url}/api/turns/s1/events?limit=0`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_query");
  });

  it("POST …/steer sends text as a user message to run::steer; POST …/stop → turn::stop", async () => {
    const steer = await post("api/turns/s1/steer", { message: "use metric units" });
    expect(steer.status).toBe(200);
    expect(await steer.json()).toEqual({ ok: true });
    expect(callsTo("run::steer").at(-1)!.data).toEqual({
      session_id: "s1",
      message: { role: "user", content: [{ type: "text", text: "use metric units" }], timestamp: expect.any(Number) },
    });
    const empty = await post("api/turns/s1/steer", { message: "" });
    expect(empty.status).toBe(400);
    const stop = await post("api/turns/s1/stop", {});
    expect(stop.status).toBe(200);
    expect(await stop.json()).toEqual({ session_id: "s1", stopping: true, state: "assistant_streaming" });
    expect(callsTo("turn::stop").at(-1)!.data).toEqual({ session_id: "s1" });
  });
});

describe("POST /api/approvals", () => {
  it("503 naming the approval-gate while it is absent; then forwards a valid decision; 400 for a bad one", async () => {
    const decision = { session_id: "s1", function_call_id: "call-1", decision: "allow", reason: "looks fine" };
    const absent = await post("api/approvals", decision);
    expect(absent.status).toBe(503);
    expect(((await absent.json()) as { error: { worker: string } }).error.worker).toBe("approval-gate");

    standIn.client.registerFunction("approval::resolve", (data: Record<string, unknown>) => {
      calls.push({ fn: "approval::resolve", data: strip(data) });
      return data.function_call_id === "gone" ? { ok: false, error: "resume_failed" } : { ok: true };
    });
    await until(async () => (await listed()).includes("approval::resolve"), "approval::resolve registered");
    const ok = await post("api/approvals", decision);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    expect(callsTo("approval::resolve").at(-1)!.data).toEqual(decision);
    const refused = await post("api/approvals", { ...decision, function_call_id: "gone" });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("resume_failed");
    const bad = await post("api/approvals", { ...decision, decision: "maybe" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "invalid_body",
      message: expect.stringContaining("decision"),
    });
    expect(callsTo("approval::resolve").length).toBe(2);
  });
});

describe("harness::sessions::changed", () => {
  it("a new session_index entry reaches a console joined to agent::sessions over /_iii/streams; an update adds nothing", async () => {
    const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
    const pushes: { id: string | null; event: { type: string; data?: unknown } }[] = [];
    ws.onmessage = (m) => pushes.push(JSON.parse(String(m.data)));
    await new Promise((resolve, reject) => ((ws.onopen = resolve), (ws.onerror = reject)));
    ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "console", streamName: "agent::sessions", groupId: "all" } }));
    await eventually(() => pushes.some((p) => p.event.type === "sync"), 5_000, "the join's sync");

    await standIn.client.trigger({
      function_id: "state::set",
      payload: { scope: "session_index", key: "fresh-1", value: { created_at: 1 } },
    });
    const push = await eventually(() => pushes.find((p) => p.event.type === "create"), 10_000, "the session's push");
    expect(push).toMatchObject({ id: "fresh-1", event: { type: "create", data: { added: ["fresh-1"] } } });

    await standIn.client.trigger({
      function_id: "state::set",
      payload: { scope: "session_index", key: "fresh-1", value: { created_at: 2 } },
    });
    await standIn.client.trigger({
      function_id: "state::set",
      payload: { scope: "session_index", key: "fresh-2", value: { created_at: 3 } },
    });
    await eventually(() => pushes.some((p) => p.id === "fresh-2"), 10_000, "the second session's push");
    // The update of fresh-1 came first and wrote nothing: only the two creates arrived.
    expect(pushes.filter((p) => p.event.type !== "sync").map((p) => [p.event.type, p.id])).toEqual([
      ["create", "fresh-1"],
      ["create", "fresh-2"],
    ]);
    ws.close();
  });
});

describe("after the orchestrator goes away", () => {
  it("POST /api/turns is a 503 again, not a hang", async () => {
    runStart?.unregister();
    await until(async () => !(await listed()).includes("run::start"), "run::start gone");
    const res = await post("api/turns", turn("s9"));
    expect(res.status).toBe(503);
  });
});
