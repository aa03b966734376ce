// Every built-in trigger type against the engine `npm start` runs, driven by iii-sdk 0.22.1.
import { registerWorker, TriggerAction, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let iii: IIIClient;

const cronTicks: string[] = [];
const delivered: { fn: string; data: unknown }[] = [];
let flakyCalls = 0;

beforeAll(async () => {
  engine = await startEngine();
  iii = registerWorker(engine.wsUrl, { workerName: "triggers-e2e", otel: { enabled: false } });
  iii.registerFunction(
    "e2e::get-item",
    async (req: { path_params: { id: string }; query_params: Record<string, string>; body: unknown; method: string }) => ({
      status_code: 200,
      headers: { "x-engine": "iii-edge" },
      body: { id: req.path_params.id, q: req.query_params, body: req.body, method: req.method },
    }),
  );
  iii.registerFunction("e2e::fail", async () => {
    throw new Error("handler exploded");
  });
  iii.registerFunction("e2e::tick", async (p: { scheduled_time: string }) => {
    cronTicks.push(p.scheduled_time);
  });
  iii.registerFunction("e2e::flaky", async (d: unknown) => {
    flakyCalls++;
    if (flakyCalls < 2) throw new Error("first attempt fails");
    delivered.push({ fn: "flaky", data: d });
  });
  iii.registerFunction("e2e::turn", async (d: { session_id: string; i: number }) => {
    await new Promise((r) => setTimeout(r, Math.random() * 4));
    delivered.push({ fn: "turn", data: d });
  });
  iii.registerFunction("e2e::poison", async () => {
    throw new Error("always");
  });
  iii.registerFunction("e2e::sub", async (d: unknown) => {
    delivered.push({ fn: "sub", data: d });
  });
  iii.registerTrigger({ type: "http", function_id: "e2e::get-item", config: { api_path: "e2e/items/:id", http_method: "POST" } });
  iii.registerTrigger({ type: "http", function_id: "e2e::fail", config: { api_path: "e2e/fail" } });
  iii.registerTrigger({ type: "cron", function_id: "e2e::tick", config: { expression: "* * * * * *" } });
  iii.registerTrigger({ type: "subscribe", function_id: "e2e::sub", config: { topic: "e2e-topic" } });
  // Registration is asynchronous: wait until the route answers.
  await eventually(async () => (await fetch(`${engine.url}/e2e/fail`)).status === 500, 15_000, "routes registered");
});

afterAll(async () => {
  await iii?.shutdown?.();
  await engine?.stop();
});

describe("triggers against npm start", () => {
  it("http: route, params, query, JSON body, headers; 404 JSON; 500 with the error; assets still served", async () => {
    const res = await fetch(`${engine.url}/e2e/items/9?x=1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"a":1}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-engine")).toBe("iii-edge");
    expect(await res.json()).toEqual({ id: "9", q: { x: "1" }, body: { a: 1 }, method: "POST" });
    const missing = await fetch(`${engine.url}/e2e/nothing`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { code: "not_found", message: "Not Found" } });
    const failed = await fetch(`${engine.url}/e2e/fail`);
    expect(failed.status).toBe(500);
    expect(((await failed.json()) as { error: { message: string } }).error.message).toBe("handler exploded");
    expect((await fetch(`${engine.url}/index.html`)).status).toBe(200);
  });

  it("queues: Cloudflare-backed retry delivers; durable FIFO keeps per-session order; poison ends in D1 dead letters", async () => {
    const r = await iii.trigger({
      function_id: "e2e::flaky",
      payload: { via: "cloudflare" },
      action: TriggerAction.Enqueue({ queue: "default" }),
    });
    expect(r).toHaveProperty("messageReceiptId");
    await Promise.all(
      ["s1", "s2", "s3"].map(async (s) => {
        for (let i = 0; i < 10; i++)
          await iii.trigger({ function_id: "e2e::turn", payload: { session_id: s, i }, action: TriggerAction.Enqueue({ queue: "turns" }) });
      }),
    );
    const poison = (await iii.trigger({
      function_id: "e2e::poison",
      payload: { session_id: "p", bad: true },
      action: TriggerAction.Enqueue({ queue: "turns" }),
    })) as { messageReceiptId: string };
    await eventually(() => delivered.filter((d) => d.fn === "turn").length === 30, 15_000, "30 turns");
    for (const s of ["s1", "s2", "s3"]) {
      expect(
        delivered
          .filter((d) => d.fn === "turn" && (d.data as { session_id: string }).session_id === s)
          .map((d) => (d.data as { i: number }).i),
      ).toEqual([...Array(10).keys()]);
    }
    await eventually(() => delivered.some((d) => d.fn === "flaky"), 20_000, "flaky delivered via Cloudflare Queues");
    expect(flakyCalls).toBe(2);
    const dlq = await eventually(
      async () => {
        const out = (await iii.trigger({ function_id: "engine::queue::dlq_messages", payload: { topic: "turns" } })) as {
          messages: { message_id: string; data: unknown; error: string; attempts: number }[];
        };
        return out.messages.length > 0 ? out.messages : undefined;
      },
      15_000,
      "dead letter",
    );
    expect(dlq[0]).toMatchObject({ message_id: poison.messageReceiptId, data: { session_id: "p", bad: true }, attempts: 4 });
    expect(dlq[0]?.error).toContain("always");
    expect(
      await iii.trigger({ function_id: "iii::queue::discard_message", payload: { queue: "turns", message_id: poison.messageReceiptId } }),
    ).toMatchObject({ discarded: true });
  });

  it("pub/sub and a browser stream subscriber over WebSocket", async () => {
    await iii.trigger({ function_id: "publish", payload: { topic: "e2e-topic", data: { hello: "subscribers" } } });
    await eventually(() => delivered.some((d) => d.fn === "sub"), 5_000, "subscriber");

    const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
    const pushes: { event: { type: string; data?: unknown }; id: string | null }[] = [];
    ws.onmessage = (m) => pushes.push(JSON.parse(String(m.data)));
    await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
    await iii.trigger({
      function_id: "stream::set",
      payload: { stream_name: "board", group_id: "g1", item_id: "card-1", data: { title: "first" } },
    });
    ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "s", streamName: "board", groupId: "g1" } }));
    await eventually(() => pushes.length === 1, 5_000, "sync");
    expect(pushes[0]?.event).toEqual({ type: "sync", data: [{ title: "first" }] });
    await iii.trigger({
      function_id: "stream::set",
      payload: { stream_name: "board", group_id: "g1", item_id: "card-2", data: { title: "second" } },
    });
    await iii.trigger({ function_id: "stream::delete", payload: { stream_name: "board", group_id: "g1", item_id: "card-1" } });
    await eventually(() => pushes.length === 3, 5_000, "changes");
    expect(pushes.slice(1).map((p) => [p.event.type, p.id])).toEqual([
      ["create", "card-2"],
      ["delete", "card-1"],
    ]);
    ws.close();
  });

  it("cron: ticks every second, and no occurrence fires twice across an engine restart", async () => {
    await eventually(() => cronTicks.length >= 2, 10_000, "ticks");
    await engine.restart();
    const before = cronTicks.length;
    // iii-sdk reconnects and replays its registrations (the cron binding included).
    await eventually(() => cronTicks.length >= before + 2, 30_000, "ticks after restart");
    expect(new Set(cronTicks).size).toBe(cronTicks.length);
    for (const t of cronTicks) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  });
});
