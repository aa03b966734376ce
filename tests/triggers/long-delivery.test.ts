// A durable FIFO delivery runs under its queue's `timeout_ms`, not a call's default deadline, and
// is not delivered again while it is still running (its lease is the queue's timeout plus a
// margin): what `turn-step` (timeout 360 s, a 300 s model stream plus hooks) needs. The engine's
// default deadline is shortened in this suite (INVOKE_TIMEOUT_MS, vitest.config.ts) so a handler
// longer than it takes seconds, not minutes. Queues `long_fifo` (timeout 5 s) and `short_fifo`
// (timeout 300 ms) are TEST_QUEUES there; their configuration is read back from the engine.
import { describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Longer than this suite's default call deadline (1.5 s), shorter than `long_fifo`'s timeout. */
const STEP_MS = 2_000;

interface QueueConfigSeen {
  timeout_ms: number;
  type: string;
}
const configOf = async (w: RawWorker, topic: string) =>
  ((await w.call("engine::queue::topic_stats", { topic })).result as { config: QueueConfigSeen }).config;

describe("long deliveries on a durable FIFO", () => {
  it("a step longer than the default deadline runs once, under the queue's timeout_ms, holding back its group", async () => {
    const w = await RawWorker.connect(`long-${crypto.randomUUID().slice(0, 8)}`);
    expect(await configOf(w, "long_fifo")).toMatchObject({ type: "fifo", timeout_ms: 5_000 });
    const runs: { id: string; session: string; n: number; start: number; end?: number }[] = [];
    w.fn("long::step", async (d, _m, id) => {
      const { session_id, n } = d as { session_id: string; n: number };
      const run: (typeof runs)[number] = { id, session: session_id, n, start: Date.now() };
      runs.push(run);
      await sleep(STEP_MS);
      run.end = Date.now();
      return { ok: true };
    });
    await w.settle();

    // The default deadline really is shorter than the step: a plain call of it times out.
    const plain = await w.call("long::step", { session_id: "plain", n: 0 });
    expect(plain.error?.code).toBe("timeout");

    const enqueue = { type: "enqueue", queue: "long_fifo" };
    const receipts: string[] = [];
    for (const [session_id, n] of [
      ["s1", 1],
      ["s1", 2],
      ["s2", 1],
    ] as const) {
      const r = await w.call("long::step", { session_id, n }, enqueue);
      receipts.push((r.result as { messageReceiptId: string }).messageReceiptId);
    }
    await eventually(
      () => runs.filter((r) => r.session !== "plain" && r.end !== undefined).length === 3,
      3 * STEP_MS + 4_000,
      "three steps done",
    );
    await sleep(500);
    const steps = runs.filter((r) => r.session !== "plain");
    // Each message ran exactly once: not redelivered at the default deadline, nor while running.
    expect(steps.map((r) => r.id).sort()).toEqual([...receipts].sort());
    const [a, b] = steps.filter((r) => r.session === "s1").sort((x, y) => x.n - y.n);
    // Its group waited for it: s1's second step started after the first one finished…
    expect(b!.start).toBeGreaterThanOrEqual(a!.end!);
    // …while another group ran beside it.
    const s2 = steps.find((r) => r.session === "s2")!;
    expect(s2.start).toBeLessThan(a!.end!);
    const dead = await w.call("engine::queue::dlq_messages", { topic: "long_fifo" });
    expect((dead.result as { messages: unknown[] }).messages).toEqual([]);
    await w.close();
  });

  it("the queue's timeout_ms is the delivery's deadline: past it the attempt fails and the message is retried", async () => {
    const w = await RawWorker.connect(`short-${crypto.randomUUID().slice(0, 8)}`);
    expect(await configOf(w, "short_fifo")).toMatchObject({ type: "fifo", timeout_ms: 300 });
    const starts: { id: string; at: number }[] = [];
    w.fn("short::step", async (_d, _m, id) => {
      starts.push({ id, at: Date.now() });
      // The first attempt outlives the queue's 300 ms deadline (but not the default 1.5 s one).
      if (starts.length === 1) await sleep(1_000);
      return { ok: true };
    });
    await w.settle();
    const r = await w.call("short::step", { session_id: "s" }, { type: "enqueue", queue: "short_fifo" });
    const receipt = (r.result as { messageReceiptId: string }).messageReceiptId;
    await eventually(() => starts.length >= 2, 4_000, "a second attempt");
    const [first, second] = starts as [(typeof starts)[number], (typeof starts)[number]];
    expect(second.id).toBe(receipt);
    expect(first.id).toBe(receipt);
    // Retried at the queue's deadline (plus its 5 ms backoff), before the slow attempt ended and
    // well before the default deadline would have fired.
    expect(second.at - first.at).toBeGreaterThanOrEqual(250);
    expect(second.at - first.at).toBeLessThan(1_000);
    await w.close();
  });
});
