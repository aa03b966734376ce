// One conformance suite for the queue backends (engine-do/src/core/queues/backend.ts), run by one
// test file per backend (queue-backend.<name>.test.ts) against the real Engine object, D1 and, for
// Cloudflare, the local Queues simulator. It drives a queue of that backend through the `enqueue`
// action and the queue built-ins, as a worker would, and reads the queue's configuration back from
// the engine, so the expectations follow TEST_QUEUES. A property a backend does not offer by design
// is declared by its harness with the reason, and the suite checks that the engine refuses it.
import { parseQueueConfigs, backoffDelay, type QueueBackendName, type QueueConfig } from "@iii-edge/engine-do/core/queues/config.ts";
import { beforeAll, describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

export interface QueueBackendHarness {
  backend: QueueBackendName;
  /** A standard queue this backend carries (TEST_QUEUES in vitest.config.ts). Its concurrency must
   * leave room for `concurrency + 3` messages in one delivery batch (Cloudflare: ≤ 10). */
  queue: string;
  /** A fifo queue of this backend, or why the backend offers none (by design, with the reason). */
  fifo: { queue: string; group_field: string } | { unsupported: string };
  /** Upper bound of one enqueue → handler hop on a loaded box. */
  hop: number;
  /** How long to watch for a delivery that must not come (a repeat, a redelivery). */
  quiet: number;
}

interface DeadLetterListing {
  message_id: string;
  function_id: string;
  data: unknown;
  attempts: number;
  error: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const receiptOf = (r: { result?: unknown; error?: { code: string; message: string } }): string => {
  expect(r.error).toBeUndefined();
  const id = (r.result as { messageReceiptId?: unknown }).messageReceiptId;
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  return id as string;
};

export function queueBackendConformance(name: string, makeHarness: () => QueueBackendHarness): void {
  const h = makeHarness();
  const enqueue = (queue: string, idempotency_key?: string) =>
    idempotency_key ? { type: "enqueue", queue, idempotency_key } : { type: "enqueue", queue };
  const connect = (what: string) => RawWorker.connect(`conf-${h.backend}-${what}-${crypto.randomUUID().slice(0, 8)}`);
  let cfg: QueueConfig;

  describe(`queue backend conformance: ${name} (queue '${h.queue}')`, () => {
    beforeAll(async () => {
      const w = await connect("config");
      const stats = await w.call("engine::queue::topic_stats", { topic: h.queue });
      await w.close();
      cfg = (stats.result as { config: QueueConfig }).config;
      // The harness really points at this backend, and the cases below fit its configuration.
      expect(cfg).toMatchObject({ name: h.queue, backend: h.backend, type: "standard" });
      expect(cfg.max_retries).toBeGreaterThanOrEqual(1);
      expect(cfg.concurrency).toBeGreaterThanOrEqual(2);
    });

    it("delivers the original data to the function, with the receipt id as invocation id", async () => {
      const w = await connect("data");
      const got: { data: unknown; id: string }[] = [];
      w.fn("conf::echo", (data, _m, id) => void got.push({ data, id }));
      await w.settle();
      const data = {
        text: 'héllo ✓ \u0000 "quoted"',
        n: -42.5,
        flag: false,
        none: null,
        nested: { list: [1, null, true, "x"], empty: {} },
        big: "x".repeat(10_000),
      };
      const receipt = receiptOf(await w.call("conf::echo", data, enqueue(h.queue)));
      await eventually(() => got.length === 1, h.hop, "the delivery");
      expect(got[0]).toEqual({ data, id: receipt });
      await w.close();
    });

    // One batch of always-failing messages walks the dead-letter life cycle; the cases run in order
    // and share it (dead-lettering takes seconds on Cloudflare, so it is done once).
    describe("retries, dead letters, redrive and discard", () => {
      let w: RawWorker;
      let fail = true;
      const attempts = new Map<string, number[]>();
      const delivered: { data: unknown; id: string }[] = [];
      const sent = [{ order: "a" }, { order: "b" }, { order: "c" }];
      let ids: string[] = [];
      const dlq = async (): Promise<DeadLetterListing[]> =>
        ((await w.call("engine::queue::dlq_messages", { topic: h.queue, limit: 100 })).result as { messages: DeadLetterListing[] })
          .messages;

      it("retries a failing handler with exponential backoff, then dead-letters it after max_retries", async () => {
        w = await connect("dead");
        w.fn("conf::poison", (data, _m, id) => {
          attempts.set(id, [...(attempts.get(id) ?? []), Date.now()]);
          if (fail) throw new Error(`always failing (attempt ${attempts.get(id)!.length})`);
          delivered.push({ data, id });
        });
        await w.settle();
        ids = [];
        for (const d of sent) ids.push(receiptOf(await w.call("conf::poison", d, enqueue(h.queue))));
        let backoffs = 0;
        for (let k = 1; k <= cfg.max_retries; k++) backoffs += backoffDelay(cfg, k);
        const rows = await eventually(
          async () => {
            const r = await dlq();
            return r.length === sent.length ? r : undefined;
          },
          (cfg.max_retries + 1) * h.hop + 2 * backoffs,
          "every message dead-lettered",
        );

        for (const id of ids) {
          const at = attempts.get(id) ?? [];
          // 1 attempt + max_retries retries, every one with the receipt id as invocation id.
          expect(at).toHaveLength(cfg.max_retries + 1);
          // Attempt n+1 comes no sooner than backoff_ms·2^(n-1) after attempt n.
          for (let n = 1; n < at.length; n++)
            expect(at[n]! - at[n - 1]!, `gap after attempt ${n} of ${id}`).toBeGreaterThanOrEqual(backoffDelay(cfg, n));
        }
        for (const row of rows) {
          const i = ids.indexOf(row.message_id);
          expect(i).toBeGreaterThanOrEqual(0);
          expect(row).toMatchObject({ function_id: "conf::poison", data: sent[i], attempts: cfg.max_retries + 1 });
          expect(row.error).toBe(`invocation_failed: always failing (attempt ${cfg.max_retries + 1})`);
        }
        // A dead letter leaves the backend: no attempt after the last.
        await sleep(h.quiet);
        expect(ids.map((id) => attempts.get(id)?.length)).toEqual(ids.map(() => cfg.max_retries + 1));
      });

      it("lists dead letters: dlq_topics counts them, dlq_messages pages them", async () => {
        expect((await w.call("engine::queue::dlq_topics", {})).result).toEqual({ topics: [{ topic: h.queue, count: sent.length }] });
        const page = async (offset: number, limit: number) =>
          (await w.call("engine::queue::dlq_messages", { topic: h.queue, offset, limit })).result as {
            topic: string;
            messages: DeadLetterListing[];
          };
        const first = await page(0, 2);
        const rest = await page(2, 2);
        expect(first.topic).toBe(h.queue);
        expect(first.messages).toHaveLength(2);
        expect(rest.messages).toHaveLength(1);
        expect([...first.messages, ...rest.messages].map((m) => m.message_id).sort()).toEqual([...ids].sort());
      });

      it("iii::queue::status (iii's documented check) counts them, with nothing pending; an unknown queue is not_found", async () => {
        expect((await w.call("iii::queue::status", { queue: h.queue })).result).toMatchObject({
          queue: h.queue,
          pending: 0,
          inflight: 0,
          dlq_count: sent.length,
        });
        expect((await w.call("iii::queue::status", { queue: "no-such-queue" })).error?.code).toBe("not_found");
      });

      it("discard_message drops one dead letter for good", async () => {
        expect((await w.call("iii::queue::discard_message", { queue: h.queue, message_id: ids[0] })).result).toEqual({
          queue: h.queue,
          message_id: ids[0],
          discarded: true,
        });
        expect((await w.call("iii::queue::discard_message", { queue: h.queue, message_id: ids[0] })).error?.code).toBe("not_found");
        expect((await dlq()).map((m) => m.message_id).sort()).toEqual([ids[1], ids[2]].sort());
      });

      it("redrive_message delivers one dead letter again, with its original id and data", async () => {
        fail = false;
        expect((await w.call("iii::queue::redrive_message", { queue: h.queue, message_id: ids[0] })).error?.code).toBe("not_found");
        expect((await w.call("iii::queue::redrive_message", { queue: h.queue, message_id: ids[1] })).result).toEqual({
          queue: h.queue,
          message_id: ids[1],
          redriven: true,
        });
        expect((await dlq()).map((m) => m.message_id)).toEqual([ids[2]]);
        await eventually(() => delivered.length === 1, h.hop, "the redriven message");
        expect(delivered).toEqual([{ data: sent[1], id: ids[1] }]);
      });

      it("redrive delivers every remaining dead letter again; the discarded one never comes back", async () => {
        expect((await w.call("iii::queue::redrive", { queue: h.queue })).result).toEqual({ queue: h.queue, redriven: 1 });
        expect(await dlq()).toEqual([]);
        expect((await w.call("engine::queue::dlq_topics", {})).result).toEqual({ topics: [] });
        await eventually(() => delivered.length === 2, h.hop, "the redriven queue");
        await sleep(h.quiet);
        expect(delivered).toEqual([
          { data: sent[1], id: ids[1] },
          { data: sent[2], id: ids[2] },
        ]);
        await w.close();
      });
    });

    const fifo = h.fifo;
    if ("unsupported" in fifo) {
      it(`FIFO order per group: not offered by the ${name} backend, by design (${fifo.unsupported}); a fifo queue on it is refused`, () => {
        const queues = JSON.stringify({ ordered: { backend: h.backend, type: "fifo", message_group_field: "group" } });
        expect(() => parseQueueConfigs(queues, true)).toThrow(/fifo needs backend "durable"/);
      });
    } else {
      it(`FIFO order per group by '${fifo.group_field}', groups independent: a held or failing head holds back only its group`, async () => {
        const w = await connect("fifo");
        const seen = new Map<string, number[]>();
        let releaseHead!: () => void;
        const headHeld = new Promise<void>((r) => (releaseHead = r));
        let headFailed = false;
        w.fn("conf::turn", async (d) => {
          const group = String((d as Record<string, unknown>)[fifo.group_field]);
          const i = (d as { i: number }).i;
          if (group === "a" && i === 0) {
            await headHeld;
            if (!headFailed) {
              headFailed = true;
              throw new Error("retry the head");
            }
          }
          seen.set(group, [...(seen.get(group) ?? []), i]);
        });
        await w.settle();
        for (let i = 0; i < 5; i++)
          for (const g of ["a", "b"]) receiptOf(await w.call("conf::turn", { [fifo.group_field]: g, i }, enqueue(fifo.queue)));
        // Group b runs to the end while a's head is held; nothing of a overtakes its head.
        await eventually(() => seen.get("b")?.length === 5, h.hop, "group b, past a's held head");
        expect(seen.get("a")).toBeUndefined();
        releaseHead();
        await eventually(() => seen.get("a")?.length === 5, h.hop, "group a after its head failed once");
        expect(headFailed).toBe(true);
        expect(seen.get("a")).toEqual([0, 1, 2, 3, 4]);
        expect(seen.get("b")).toEqual([0, 1, 2, 3, 4]);
        // A message without the group field has no place in any group.
        expect((await w.call("conf::turn", { i: 9 }, enqueue(fifo.queue))).error?.code).toBe("enqueue_error");
        await w.close();
      });
    }

    it("idempotency key: a repeat returns the first receipt and the handler runs once", async () => {
      const w = await connect("idem");
      const got: { data: unknown; id: string }[] = [];
      w.fn("conf::once", (data, _m, id) => void got.push({ data, id }));
      await w.settle();
      const first = receiptOf(await w.call("conf::once", { i: 1 }, enqueue(h.queue, "order-42")));
      // Repeats, concurrent with each other and with another key.
      const [again, alsoAgain, other] = await Promise.all([
        w.call("conf::once", { i: 2 }, enqueue(h.queue, "order-42")),
        w.call("conf::once", { i: 3 }, enqueue(h.queue, "order-42")),
        w.call("conf::once", { i: 4 }, enqueue(h.queue, "order-43")),
      ]);
      expect(receiptOf(again!)).toBe(first);
      expect(receiptOf(alsoAgain!)).toBe(first);
      const second = receiptOf(other!);
      expect(second).not.toBe(first);
      await eventually(() => got.length === 2, h.hop, "one delivery per key");
      await sleep(h.quiet);
      expect(got.sort((x, y) => (x.data as { i: number }).i - (y.data as { i: number }).i)).toEqual([
        { data: { i: 1 }, id: first },
        { data: { i: 4 }, id: second },
      ]);
      await w.close();
    });

    it("concurrency: never more handlers of the queue at once than its concurrency, and the limit is reached", async () => {
      const w = await connect("concurrency");
      let running = 0;
      let peak = 0;
      const done = new Set<string>();
      w.fn("conf::slow", async (_d, _m, id) => {
        running++;
        peak = Math.max(peak, running);
        await sleep(150);
        running--;
        done.add(id);
      });
      await w.settle();
      const n = cfg.concurrency + 3;
      const ids = (await Promise.all([...Array(n).keys()].map((i) => w.call("conf::slow", { i }, enqueue(h.queue))))).map(receiptOf);
      await eventually(() => done.size === n, h.hop + n * 150, "every slow delivery");
      expect(new Set(ids)).toEqual(done);
      expect(peak).toBe(cfg.concurrency);
      await w.close();
    });
  });
}
