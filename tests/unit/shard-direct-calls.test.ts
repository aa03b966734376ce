// A connection shard's direct calls (engine-do/src/shards/direct-calls.ts) in plain Node with a fake
// clock: the deadlines of both sides run on the object's clock and timers ports, under one timer
// however many calls are open (workerd caps an isolate's active timers), and every call ends once:
// at its answer, at its deadline, or when its worker goes.
import { describe, expect, it } from "vitest";
import type { CallOutcome, ShardInvokeOutcome, ShardInvokeRequest } from "@iii-edge/protocol";
import { DirectCalls } from "@iii-edge/engine-do/shards/direct-calls.ts";
import { FakeTime } from "@iii-edge/test-support/fake-time";

class FakeSocket {
  readonly sent: Record<string, unknown>[] = [];
  send(text: string): void {
    this.sent.push(JSON.parse(text) as Record<string, unknown>);
  }
}

/** Lets pending promise callbacks run (the route lookup, an answer on its way). */
const settle = () => new Promise<void>((r) => setImmediate(r));

const SHARD = "default#shard-0";
const OTHER = "default#shard-1";

function setup() {
  const time = new FakeTime();
  const sockets = new Map<string, FakeSocket>();
  const sent: { req: ShardInvokeRequest; answer(o: ShardInvokeOutcome): void }[] = [];
  const viaCatalog: string[] = [];
  let ids = 0;
  const direct = new DirectCalls(
    {
      name: SHARD,
      route: async () => ({ shard: OTHER, worker_id: "target" }),
      invokeOn: (_shard, req) => new Promise((answer) => sent.push({ req, answer })),
      viaCatalog: (_w, raw) => void viaCatalog.push(raw),
      socketOf: (w) => sockets.get(w) as unknown as WebSocket | undefined,
    },
    { clock: time.clock, timers: time.timers, newId: () => `direct-${++ids}` },
  );
  const caller = new FakeSocket();
  sockets.set("caller", caller);
  direct.grants.set("caller", { sub: "caller", ns: ["default"] });
  const call = (invocation_id: string, timeout_ms?: number) =>
    direct.intercept(
      "caller",
      caller as unknown as WebSocket,
      JSON.stringify({ type: "invokefunction", invocation_id, function_id: "svc::fn", data: { n: 1 }, timeout_ms }),
      true,
    );
  return { time, sockets, sent, viaCatalog, direct, caller, call };
}

describe("direct calls between shards, on the ports' clock and timers", () => {
  it("caller side: a call the target shard never answers times out at its deadline, under one timer for all", async () => {
    const { time, sent, viaCatalog, direct, caller, call } = setup();
    // The first call goes through the catalog while the route is looked up; the next ones go direct.
    expect(call("first", 5_000)).toBe(false);
    await settle();
    for (let i = 0; i < 100; i++) expect(call(`c-${i}`, 5_000 + i)).toBe(true);
    expect(sent).toHaveLength(100);
    expect(viaCatalog).toHaveLength(0);
    expect(time.active).toBe(1);
    expect(direct.openDeadlines).toBe(100);

    time.advance(4_999);
    expect(caller.sent).toHaveLength(0);
    time.advance(1);
    expect(caller.sent).toEqual([
      {
        type: "invocationresult",
        invocation_id: "c-0",
        function_id: "svc::fn",
        error: { code: "timeout", message: "svc::fn did not answer within 5000 ms" },
      },
    ]);
    time.advance(99);
    expect(caller.sent.map((f) => f.invocation_id)).toEqual(Array.from({ length: 100 }, (_, i) => `c-${i}`));
    expect(time.active).toBe(0);
    expect(direct.openDeadlines).toBe(0);

    // A late answer changes nothing: the caller already has its one answer.
    sent[0]!.answer({ ok: true, result: "late" });
    await settle();
    expect(caller.sent).toHaveLength(100);
  });

  it("caller side: an answer before the deadline is relayed once and its deadline goes", async () => {
    const { time, sent, direct, caller, call } = setup();
    call("warm");
    await settle();
    expect(call("c-1", 2_000)).toBe(true);
    expect(call("c-2")).toBe(true); // the default deadline, 30 s
    expect(sent.map((s) => s.req.timeout_ms)).toEqual([2_000, 30_000]);
    expect(sent[0]!.req.data).toEqual({ n: 1, _caller_worker_id: "caller" });
    sent[0]!.answer({ ok: true, result: { v: 42 } });
    await settle();
    expect(caller.sent).toEqual([{ type: "invocationresult", invocation_id: "c-1", function_id: "svc::fn", result: { v: 42 } }]);
    expect(direct.openDeadlines).toBe(1);
    time.advance(2_000);
    expect(caller.sent).toHaveLength(1);
    time.advance(28_000);
    expect(caller.sent.at(-1)).toMatchObject({ invocation_id: "c-2", error: { code: "timeout" } });
    expect(time.active).toBe(0);
  });

  it("caller side: a repeated invocation id keeps each call's own deadline", async () => {
    const { time, caller, call } = setup();
    call("warm");
    await settle();
    expect(call("same", 1_000)).toBe(true);
    expect(call("same", 3_000)).toBe(true);
    time.advance(1_000);
    expect(caller.sent).toHaveLength(1);
    time.advance(2_000);
    expect(caller.sent).toHaveLength(2);
  });

  it("caller side: a route the target shard calls stale goes through the catalog, with no deadline left", async () => {
    const { time, sent, viaCatalog, direct, call } = setup();
    call("warm");
    await settle();
    expect(call("c-1", 1_000)).toBe(true);
    sent[0]!.answer({ stale: true });
    await settle();
    expect(viaCatalog).toHaveLength(1);
    expect(JSON.parse(viaCatalog[0]!)).toMatchObject({ invocation_id: "c-1" });
    expect(direct.openDeadlines).toBe(0);
    expect(time.active).toBe(0);
  });

  it("target side: the worker's answer settles the call; silence ends it a second after the caller's deadline", async () => {
    const { time, sockets, direct } = setup();
    const worker = new FakeSocket();
    sockets.set("target", worker);
    const outcomes: CallOutcome[] = [];
    const run = (timeout_ms: number) =>
      direct.invokeHere({ worker_id: "target", function_id: "svc::fn", data: { n: 1 }, timeout_ms }).then((o) => {
        if (!("stale" in o)) outcomes.push(o);
      });
    const answered = run(10_000);
    const silent = run(2_000);
    expect(worker.sent.map((f) => f.invocation_id)).toEqual(["direct-1", "direct-2"]);
    expect(time.active).toBe(1);

    const result = JSON.stringify({ type: "invocationresult", invocation_id: "direct-1", function_id: "svc::fn", result: 7 });
    // Only from the worker the call was sent to.
    expect(direct.intercept("caller", worker as unknown as WebSocket, result, true)).toBe(false);
    expect(direct.intercept("target", worker as unknown as WebSocket, result, true)).toBe(true);
    await answered;
    expect(outcomes).toEqual([{ ok: true, result: 7 }]);

    time.advance(2_999);
    expect(outcomes).toHaveLength(1);
    time.advance(1);
    await silent;
    expect(outcomes[1]).toEqual({ ok: false, error: { code: "timeout", message: "svc::fn did not answer within 2000 ms" } });
    expect(time.active).toBe(0);
    expect(direct.openDeadlines).toBe(0);
    // Its late answer is no longer the direct path's: it goes on to the catalog (which drops it).
    const late = JSON.stringify({ type: "invocationresult", invocation_id: "direct-2", function_id: "svc::fn", result: 8 });
    expect(direct.intercept("target", worker as unknown as WebSocket, late, true)).toBe(false);
  });

  it("target side: a worker that goes ends its calls at once, and their deadlines with them", async () => {
    const { time, sockets, direct } = setup();
    sockets.set("target", new FakeSocket());
    const calls = [1, 2, 3].map(() => direct.invokeHere({ worker_id: "target", function_id: "svc::fn", data: null, timeout_ms: 60_000 }));
    expect(time.active).toBe(1);
    direct.gone("target");
    for (const o of await Promise.all(calls)) expect(o).toMatchObject({ ok: false, error: { code: "invocation_stopped" } });
    expect(time.active).toBe(0);
    expect(direct.openDeadlines).toBe(0);
  });
});
