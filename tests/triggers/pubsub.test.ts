// Pub/sub: `publish` fans out to every `subscribe` binding of the topic; `iii::durable::publish`
// gives each subscribed function its own durable delivery, with retries and dead letters.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

describe("pub/sub", () => {
  it("publish reaches every subscriber of the topic and no other", async () => {
    const w = await RawWorker.connect("ps-fanout");
    const got: [string, unknown][] = [];
    w.fn("ps::a", (d) => void got.push(["a", d]));
    w.fn("ps::b", (d) => void got.push(["b", d]));
    w.fn("ps::c", (d) => void got.push(["c", d]));
    w.trigger("subscribe", "ps::a", { topic: "orders" });
    w.trigger("subscribe", "ps::b", { topic: "orders" });
    w.trigger("subscribe", "ps::c", { topic: "other" });
    await w.settle();
    expect((await w.call("publish", { topic: "orders", data: { id: 1 } })).error).toBeUndefined();
    expect((await w.call("publish", { topic: "", data: 1 })).error?.code).toBe("topic_not_set");
    await eventually(() => got.length === 2, 5000, "two deliveries");
    await new Promise((r) => setTimeout(r, 50));
    expect(got.sort()).toEqual([
      ["a", { id: 1 }],
      ["b", { id: 1 }],
    ]);
    await w.close();
  });

  it("durable publish: one delivery per function, retried, dead-lettered under durable:<topic>, redrivable", async () => {
    const ns = "ps-durable";
    const w = await RawWorker.connect(ns);
    let okCalls = 0;
    let flaky = 0;
    let poisonTries = 0;
    w.fn("ps::ok", () => void okCalls++);
    w.fn("ps::flaky", () => {
      if (++flaky < 2) throw new Error("once");
    });
    w.fn("ps::poison", () => {
      poisonTries++;
      throw new Error("never");
    });
    w.trigger("durable:subscriber", "ps::ok", { topic: "invoices" });
    w.trigger("durable:subscriber", "ps::ok", { topic: "invoices" }); // same function: still one delivery
    w.trigger("durable:subscriber", "ps::flaky", { topic: "invoices", queue_config: { maxRetries: 3, backoffDelayMs: 5 } });
    w.trigger("durable:subscriber", "ps::poison", { topic: "invoices", queue_config: { maxRetries: 1, backoffDelayMs: 5 } });
    await w.settle();
    const r = await w.call("iii::durable::publish", { topic: "invoices", data: { n: 7 } });
    expect((r.result as { messageReceiptIds: string[] }).messageReceiptIds).toHaveLength(3);
    await eventually(
      async () => {
        const rows = (
          await env.DB.prepare("SELECT * FROM dead_letters WHERE namespace = ?")
            .bind(ns)
            .all<{ queue: string; function_id: string; attempts: number; data: string }>()
        ).results;
        return rows.length === 1 ? rows : undefined;
      },
      5000,
      "poison dead-lettered",
    );
    expect(okCalls).toBe(1);
    expect(flaky).toBe(2);
    expect(poisonTries).toBe(2);
    const dlq = await w.call("engine::queue::dlq_messages", { topic: "durable:invoices" });
    expect((dlq.result as { messages: { function_id: string; data: unknown; attempts: number }[] }).messages[0]).toMatchObject({
      function_id: "ps::poison",
      data: { n: 7 },
      attempts: 2,
    });
    await w.close();
  });
});
