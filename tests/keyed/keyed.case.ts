// One conformance suite for keyed workers (docs/keyed-workers.md), run against each host: the
// Worker-hosted one (a KeyedObjects Durable Object per key, keyed.workerd.test.ts) and the Node one
// (node:sqlite per key in a `runWorkers` process, tests/node/keyed-worker.test.ts). Both run the same
// worker module, demo-app's keyed counter (`keyedCounter(prefix)`), and are driven through the
// engine as any caller would; only how to lose an instance's memory and how to wake its alarms
// differ, and each harness says how it does that.
import { describe, expect, it } from "vitest";
import { eventually } from "@iii-edge/test-support/wait";
import type { IIIClient } from "iii-sdk";

export interface CallOutcome {
  result?: unknown;
  error?: { code: string; message: string };
}

/** A call through an iii-sdk client as an outcome: its result, or its typed error. */
export async function sdkOutcome(client: IIIClient, function_id: string, payload: unknown): Promise<CallOutcome> {
  try {
    return { result: await client.trigger({ function_id, payload, timeoutMs: 20_000 }) };
  } catch (e) {
    const err = e as { code?: string; message?: string };
    return { error: { code: String(err.code), message: String(err.message) } };
  }
}

export interface KeyedHarness {
  /** The counter's functions are `<prefix>::add`, `<prefix>::get` and `<prefix>::add-later`. */
  prefix: string;
  /** A call through the engine. */
  call(functionId: string, data: unknown): Promise<CallOutcome>;
  /** Lose the memory of `key`'s instance (a Durable Object eviction; a restart of the Node
   * process), keeping its storage; resolves once calls are served again. */
  evict(key: string): Promise<void>;
  /** Wake `key`'s instance for its due alarms twice at once, now (a platform alarm repeated
   * while the first is still running). */
  wakeAlarms(key: string): Promise<void>;
}

const uid = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

export function keyedConformance(name: string, makeHarness: () => KeyedHarness): void {
  describe(`keyed worker conformance: ${name}`, () => {
    const h = makeHarness();
    const fn = (f: "add" | "get" | "add-later") => `${h.prefix}::${f}`;
    const ok = async (f: "add" | "get" | "add-later", data: Record<string, unknown>) => {
      const out = await h.call(fn(f), data);
      expect(out.error, `${f} ${JSON.stringify(data)}`).toBeUndefined();
      return out.result as { user_id: string; count: number; alarm_id: string };
    };
    const count = async (user_id: string) => (await ok("get", { user_id })).count;

    it("a call without a usable key is answered invalid_arguments and changes nothing", async () => {
      const user_id = uid("nokey");
      for (const data of [{}, { by: 2 }, { user_id: 7 }, { user_id: "" }, { user_id: "a/b" }, { user_id: "x".repeat(257) }]) {
        const out = await h.call(fn("add"), data);
        expect(out.error, JSON.stringify(data)).toMatchObject({ code: "invalid_arguments" });
      }
      expect(await count(user_id)).toBe(0);
    });

    it("keeps each key's count in its own storage", async () => {
      const [a, b] = [uid("a"), uid("b")];
      expect((await ok("add", { user_id: a, by: 2 })).count).toBe(2);
      expect((await ok("add", { user_id: a, by: 3 })).count).toBe(5);
      expect((await ok("add", { user_id: b })).count).toBe(1);
      expect(await count(a)).toBe(5);
      expect(await count(b)).toBe(1);
    });

    it("runs the calls on one key one at a time, and calls on other keys meanwhile", async () => {
      const [k, other, gate] = [uid("serial"), uid("other"), uid("gate")];
      // The first reads its count and then waits for the gate before writing it: were the second
      // let in meanwhile, both would read 0 and one increment would be lost.
      const settled: string[] = [];
      const held = h.call(fn("add"), { user_id: k, wait_for: gate }).then((r) => (settled.push("held"), r));
      const next = h.call(fn("add"), { user_id: k }).then((r) => (settled.push("next"), r));
      // Another key is not behind that line.
      expect((await ok("add", { user_id: other })).count).toBe(1);
      expect(settled).not.toContain("held");
      const open = await h.call("state::set", { scope: "keyed-counter-gates", key: gate, value: true });
      expect(open.error).toBeUndefined();
      const counts = [(await held).result, (await next).result].map((r) => (r as { count: number }).count);
      expect(counts.sort()).toEqual([1, 2]);
      expect(await count(k)).toBe(2);
    });

    it("storage survives the loss of the instance's memory", async () => {
      const k = uid("evict");
      await ok("add", { user_id: k, by: 5 });
      await h.evict(k);
      expect(await count(k)).toBe(5);
      expect((await ok("add", { user_id: k })).count).toBe(6);
    });

    it("an alarm fires once, moved by its id, and a repeated wake fires nothing more", async () => {
      const k = uid("alarm");
      const far = Date.now() + 3_600_000;
      const first = await ok("add-later", { user_id: k, by: 100, at: far, alarm_id: "once" });
      // The same id moves the pending alarm: it now adds 3, at once.
      const moved = await ok("add-later", { user_id: k, by: 3, alarm_id: "once" });
      expect(moved.alarm_id).toBe(first.alarm_id);
      await h.wakeAlarms(k);
      await eventually(async () => (await count(k)) === 3, 10_000, "the alarm's add");
      await h.wakeAlarms(k);
      await h.wakeAlarms(k);
      expect(await count(k)).toBe(3);
    });

    it("an alarm set before the instance lost its memory still fires", async () => {
      const k = uid("alarm-evict");
      await ok("add", { user_id: k });
      await ok("add-later", { user_id: k, by: 4, at: Date.now() + 300 });
      await h.evict(k);
      await eventually(async () => (await count(k)) === 5, 15_000, "the alarm's add after the eviction");
    });
  });
}
