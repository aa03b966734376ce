// A call answers alike whichever object routes it: the catalog's core (engine-do/src/core/engine.ts)
// and a connection shard's direct path (engine-do/src/shards/direct-calls.ts) run on one call table,
// one answer frame and one caller stamp (engine-do/src/core/call-table.ts). Each case below runs
// the same call through both, in plain Node on a fake clock, and the caller and the worker must see
// the same frames from either.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { MAX_FRAME_BYTES } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { SocketConn } from "@iii-edge/engine-do/core/socket-conn.ts";
import { DirectCalls } from "@iii-edge/engine-do/shards/direct-calls.ts";
import { FakeTime } from "@iii-edge/test-support/fake-time";
import { nodePorts } from "@iii-edge/test-support/node-sql";

class FakeSocket {
  readonly sent: Record<string, unknown>[] = [];
  send(text: string): void {
    this.sent.push(JSON.parse(text) as Record<string, unknown>);
  }
  close(): void {}
}

/** Lets pending promise callbacks run (a route lookup, an answer on its way). */
const flush = () => new Promise<void>((r) => setImmediate(r));

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** One way to route: a caller socket, a target socket, and how frames from each reach the router. */
interface Path {
  time: FakeTime;
  caller: FakeSocket;
  target: FakeSocket;
  fromCaller(frame: object): Promise<void>;
  fromTarget(frame: object): Promise<void>;
  targetGone(): Promise<void>;
}

/** The catalog object's core: both workers on its own sockets. */
function viaEngine(): Path {
  const time = new FakeTime();
  const core = new EngineCore(nodePorts(new DatabaseSync(":memory:"), { clock: time.clock, timers: time.timers }));
  core.start([]);
  const caller = new FakeSocket();
  const target = new FakeSocket();
  const callerConn = new SocketConn(caller, "caller");
  const targetConn = new SocketConn(target, "target");
  core.connect(targetConn, "t");
  core.connect(callerConn, "c");
  core.message(targetConn, JSON.stringify({ type: "registerfunction", id: "svc::fn" }));
  target.sent.length = 0;
  caller.sent.length = 0;
  return {
    time,
    caller,
    target,
    fromCaller: async (f) => {
      core.message(callerConn, JSON.stringify(f));
      await flush();
    },
    fromTarget: async (f) => {
      core.message(targetConn, JSON.stringify(f));
      await flush();
    },
    targetGone: async () => {
      core.disconnect("target");
      await flush();
    },
  };
}

/** A connection shard holding both workers: the route is known, so the call goes direct. */
async function viaShard(): Promise<Path> {
  const time = new FakeTime();
  const caller = new FakeSocket();
  const target = new FakeSocket();
  const sockets = new Map<string, FakeSocket>([
    ["caller", caller],
    ["target", target],
  ]);
  const viaCatalog: string[] = [];
  let ids = 0;
  const direct: DirectCalls = new DirectCalls(
    {
      name: "default#shard-0",
      route: async () => ({ shard: "default#shard-0", worker_id: "target" }),
      invokeOn: (_shard, req) => direct.invokeHere(req),
      viaCatalog: (_w, raw) => void viaCatalog.push(raw),
      socketOf: (w) => sockets.get(w) as unknown as WebSocket | undefined,
    },
    { clock: time.clock, timers: time.timers, newId: () => `direct-${++ids}` },
  );
  direct.grants.set("caller", { sub: "caller", ns: ["default"] });
  const send = (w: string, f: object) => {
    const raw = JSON.stringify(f);
    if (!direct.intercept(w, sockets.get(w) as unknown as WebSocket, raw, true)) viaCatalog.push(raw);
  };
  // The first call looks the route up (and goes through the catalog); the cases run after it.
  send("caller", { type: "invokefunction", invocation_id: "warm", function_id: "svc::fn", data: null });
  await flush();
  expect(viaCatalog).toHaveLength(1);
  viaCatalog.length = 0;
  return {
    time,
    caller,
    target,
    // A frame the direct path gives back would go to the catalog, which is not here: the
    // cases' answers can only come from the direct path.
    fromCaller: async (f) => {
      send("caller", f);
      await flush();
    },
    fromTarget: async (f) => {
      send("target", f);
      await flush();
    },
    targetGone: async () => {
      direct.gone("target");
      await flush();
    },
  };
}

const call = (timeout_ms: number, data: unknown = { n: 1 }) => ({
  type: "invokefunction",
  invocation_id: "c-1",
  function_id: "svc::fn",
  data,
  timeout_ms,
  traceparent: TRACEPARENT,
});

/** Runs `scenario` through both paths and returns what each path's caller and target saw. */
async function both(scenario: (p: Path) => Promise<void>) {
  const seen = [];
  for (const p of [viaEngine(), await viaShard()]) {
    await scenario(p);
    // The worker's invocation id is the router's own: compared apart from it.
    seen.push({ caller: p.caller.sent, target: p.target.sent.map(({ invocation_id: _id, ...f }) => f) });
  }
  return seen;
}

describe("one call table: the engine and a shard's direct path answer alike", () => {
  it("the call reaches the worker stamped with its caller, a claimed principal dropped; the answer comes back", async () => {
    const [engine, shard] = await both(async (p) => {
      await p.fromCaller(call(5_000, { n: 1, _caller_worker_id: "forged", _caller_principal: "root" }));
      const sent = p.target.sent[0]!;
      await p.fromTarget({ type: "invocationresult", invocation_id: sent.invocation_id, function_id: "svc::fn", result: { v: 42 } });
    });
    expect(engine!.target).toEqual([
      { type: "invokefunction", function_id: "svc::fn", data: { n: 1, _caller_worker_id: "caller" }, traceparent: TRACEPARENT },
    ]);
    expect(engine!.caller).toEqual([
      { type: "invocationresult", invocation_id: "c-1", function_id: "svc::fn", result: { v: 42 }, traceparent: TRACEPARENT },
    ]);
    expect(shard).toEqual(engine);
  });

  it("a result too large to relay ends the call with result_too_large, not silence", async () => {
    const [engine, shard] = await both(async (p) => {
      await p.fromCaller(call(5_000));
      const id = p.target.sent[0]!.invocation_id;
      // Within the frame bound as the worker sends it; over it once the caller's trace context is added.
      const envelope = JSON.stringify({ type: "invocationresult", invocation_id: id, function_id: "svc::fn", result: "" });
      const result = "x".repeat(MAX_FRAME_BYTES - envelope.length - 8);
      await p.fromTarget({ type: "invocationresult", invocation_id: id, function_id: "svc::fn", result });
    });
    expect(engine!.caller).toEqual([
      {
        type: "invocationresult",
        invocation_id: "c-1",
        function_id: "svc::fn",
        error: { code: "result_too_large", message: `the result of svc::fn is larger than ${MAX_FRAME_BYTES} bytes` },
      },
    ]);
    expect(shard).toEqual(engine);
  });

  it("a worker that disconnects ends its calls with invocation_stopped", async () => {
    const [engine, shard] = await both(async (p) => {
      await p.fromCaller(call(60_000));
      await p.targetGone();
    });
    expect(engine!.caller).toEqual([
      {
        type: "invocationresult",
        invocation_id: "c-1",
        function_id: "svc::fn",
        error: { code: "invocation_stopped", message: "Invocation stopped: the worker disconnected" },
        traceparent: TRACEPARENT,
      },
    ]);
    expect(shard).toEqual(engine);
  });

  it("silence ends the call at its deadline on the injected clock, and no timer is left", async () => {
    const [engine, shard] = await both(async (p) => {
      await p.fromCaller(call(2_000));
      p.time.advance(1_999);
      expect(p.caller.sent).toEqual([]);
      p.time.advance(1);
      await flush();
      expect(p.caller.sent).toHaveLength(1);
      // The shard's target side ends its entry a little after the caller's deadline.
      p.time.advance(5_000);
      expect(p.time.active).toBe(0);
    });
    expect(engine!.caller).toEqual([
      {
        type: "invocationresult",
        invocation_id: "c-1",
        function_id: "svc::fn",
        error: { code: "timeout", message: "svc::fn did not answer within 2000 ms" },
        traceparent: TRACEPARENT,
      },
    ]);
    expect(shard).toEqual(engine);
  });

  it("an answer from another worker than the one called is not the call's answer", async () => {
    const [engine, shard] = await both(async (p) => {
      await p.fromCaller(call(1_000));
      const id = p.target.sent[0]!.invocation_id;
      // The caller itself forging the target's answer.
      await p.fromCaller({ type: "invocationresult", invocation_id: id, function_id: "svc::fn", result: "forged" });
      expect(p.caller.sent.filter((f) => f.result === "forged")).toEqual([]);
      p.time.advance(1_000);
      await flush();
    });
    expect(engine!.caller.at(-1)).toMatchObject({ invocation_id: "c-1", error: { code: "timeout" } });
    expect(shard!.caller.at(-1)).toEqual(engine!.caller.at(-1));
  });
});
