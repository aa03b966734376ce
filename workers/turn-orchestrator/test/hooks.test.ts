// The orchestrator's hook seams (src/hooks.ts) at the layer that owns them, against a scripted
// engine stand-in: the subscriber-presence cache (docs/harness-contracts.md §7 item 1) and what the
// before/after hooks make of publish_collect's answers — deny, rewrite, fail closed on the gate,
// keep the result on the after path.
import { IIIError } from "@iii-edge/protocol";
import {
  AFTER_FUNCTION_CALL_TOPIC,
  BEFORE_FUNCTION_CALL_TOPIC,
  PUBLISH_COLLECT,
  type FunctionCall,
  type FunctionResult,
} from "@iii-edge/protocol/harness";
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import { describe, expect, it } from "vitest";
import type { Trigger } from "../src/calls.ts";
import { PRESENCE_SETTLE_MS, PRESENCE_TTL_MS, SubscriberPresence, afterFunctionCall, beforeFunctionCall } from "../src/hooks.ts";

type Binding = { function_id: string; config: unknown; status?: string };

/** engine::registered-triggers::list over `bindings`, and publish_collect answered by `collect`. */
function stand(opts: { bindings?: Binding[]; failLookup?: boolean; collect?: (payload: Record<string, unknown>) => unknown }) {
  const calls: TriggerRequest[] = [];
  const trigger = (async (req: TriggerRequest) => {
    calls.push(req);
    if (req.function_id === "engine::registered-triggers::list") {
      if (opts.failLookup) throw new IIIError("timeout", "no answer");
      return {
        registered_triggers: (opts.bindings ?? []).map((b, i) => ({
          id: `t${i}`,
          trigger_type: "durable:subscriber",
          status: "active",
          ...b,
        })),
        total: 0,
      };
    }
    if (req.function_id === PUBLISH_COLLECT) {
      if (!opts.collect) throw new IIIError("function_not_found", `Function ${PUBLISH_COLLECT} not found`);
      return opts.collect(req.payload as Record<string, unknown>);
    }
    throw new Error(`unexpected call ${req.function_id}`);
  }) as Trigger;
  const count = (fn: string) => calls.filter((c) => c.function_id === fn).length;
  return { trigger, calls, count };
}

const sub = (function_id: string, topic: string, status = "active"): Binding => ({ function_id, config: { topic }, status });

describe("subscriber presence", () => {
  it("counts distinct active subscribers per topic; absent topics and parked bindings count 0", async () => {
    const s = stand({
      bindings: [sub("a", "t1"), sub("a", "t1"), sub("b", "t1"), sub("c", "t2", "parked"), { function_id: "d", config: null }],
    });
    const p = new SubscriberPresence();
    expect(await p.subscribers(s.trigger, "t1")).toBe(2);
    expect(await p.subscribers(s.trigger, "t2")).toBe(0);
    expect(await p.subscribers(s.trigger, "t3")).toBe(0);
  });

  it("cached within the TTL (one engine query for every topic), looked up again after it", async () => {
    let now = 1_000_000;
    const s = stand({ bindings: [sub("a", "t1")] });
    const p = new SubscriberPresence(undefined, () => now);
    await Promise.all([p.subscribers(s.trigger, "t1"), p.subscribers(s.trigger, "t2")]);
    await p.subscribers(s.trigger, "t1");
    now += PRESENCE_TTL_MS - 1;
    await p.subscribers(s.trigger, "t2");
    expect(s.count("engine::registered-triggers::list")).toBe(1);
    now += 1;
    await p.subscribers(s.trigger, "t1");
    expect(s.count("engine::registered-triggers::list")).toBe(2);
  });

  it("a change notification forgets the answer; lookups inside the settle window are not cached", async () => {
    let now = 1_000_000;
    const bindings: Binding[] = [];
    const s = stand({ bindings });
    const p = new SubscriberPresence(undefined, () => now);
    expect(await p.subscribers(s.trigger, "t1")).toBe(0);
    p.invalidate();
    // The function registered (the notification), its trigger not yet: not cached…
    expect(await p.subscribers(s.trigger, "t1")).toBe(0);
    bindings.push(sub("a", "t1"));
    // …so the trigger registered a moment later is seen by the very next call.
    expect(await p.subscribers(s.trigger, "t1")).toBe(1);
    expect(s.count("engine::registered-triggers::list")).toBe(3);
    now += PRESENCE_SETTLE_MS;
    await p.subscribers(s.trigger, "t1");
    await p.subscribers(s.trigger, "t1");
    expect(s.count("engine::registered-triggers::list")).toBe(4);
  });

  it("an answer to a lookup that began before a notification is used once, not cached", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let n = 0;
    const p = new SubscriberPresence(async () => {
      n++;
      if (n === 1) await gate;
      return new Map([["t1", new Set(n === 1 ? [] : ["a"])]]);
    });
    const s = stand({});
    const first = p.subscribers(s.trigger, "t1");
    p.invalidate();
    release();
    expect(await first).toBe(0);
    expect(await p.subscribers(s.trigger, "t1")).toBe(1);
  });

  it("a failed lookup is undefined (callers treat it as subscribed) and is not cached", async () => {
    const s = stand({ failLookup: true });
    const p = new SubscriberPresence();
    expect(await p.subscribers(s.trigger, "t1")).toBeUndefined();
    expect(await p.subscribers(s.trigger, "t1")).toBeUndefined();
    expect(s.count("engine::registered-triggers::list")).toBe(2);
  });
});

const call: FunctionCall = { id: "c1", function_id: "mail::send", arguments: { to: "a@b.c", password: "hunter2", body: "hi" } };
const result: FunctionResult = { content: [{ type: "text", text: "sent" }], details: { sent: true } };
const answer = (replies: unknown[], extra: Record<string, unknown> = {}) => ({
  event_id: "e",
  replies,
  merged: { block: false },
  publish: { ok: true, subscribers: replies.length },
  resolved_by: "expected",
  ...extra,
});

describe("before a call", () => {
  it("no subscriber: the call as it is, and hook-fanout is never called", async () => {
    const s = stand({ bindings: [sub("x", AFTER_FUNCTION_CALL_TOPIC)], collect: () => answer([]) });
    expect(await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence())).toEqual({ kind: "run", call });
    expect(s.count(PUBLISH_COLLECT)).toBe(0);
  });

  it("publishes {session_id, function_call} with first_block_wins and no quiescence cut-off", async () => {
    const s = stand({ bindings: [sub("g", BEFORE_FUNCTION_CALL_TOPIC)], collect: () => answer([{}]) });
    await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence());
    const req = s.calls.find((c) => c.function_id === PUBLISH_COLLECT)!.payload as Record<string, unknown>;
    expect(req).toMatchObject({
      topic: BEFORE_FUNCTION_CALL_TOPIC,
      merge_rule: "first_block_wins",
      payload: { session_id: "s1", function_call: call },
    });
    expect(req.quiescence_ms).toBe(req.timeout_ms);
  });

  it("a blocking reply denies with the hook's reason (denied_by hook, secrets redacted in the excerpt)", async () => {
    const s = stand({
      bindings: [sub("g", BEFORE_FUNCTION_CALL_TOPIC)],
      collect: () =>
        answer([{ block: false }, { block: true, reason: "no mail on Sundays" }], {
          merged: { block: true, reason: "no mail on Sundays" },
        }),
    });
    const out = await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence());
    expect(out.kind).toBe("deny");
    if (out.kind !== "deny") return;
    expect(out.result.details).toMatchObject({
      status: "denied",
      denied_by: "hook",
      hook_topic: BEFORE_FUNCTION_CALL_TOPIC,
      function_id: "mail::send",
      args_excerpt: { password: "<redacted>" },
    });
    expect((out.result.content[0] as { text: string }).text).toContain("no mail on Sundays");
  });

  it("rewrites combine field by field in reply order (two redactions both hold)", async () => {
    const s = stand({
      bindings: [sub("g1", BEFORE_FUNCTION_CALL_TOPIC), sub("g2", BEFORE_FUNCTION_CALL_TOPIC)],
      collect: () =>
        answer([
          { arguments: { password: "<redacted>" } },
          { block: false, arguments: { body: "[scrubbed]" } },
          { arguments: "not an object" },
        ]),
    });
    expect(await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence())).toEqual({
      kind: "run",
      call: { ...call, arguments: { to: "a@b.c", password: "<redacted>", body: "[scrubbed]" } },
    });
  });

  it("fails closed (gate_unavailable): hook-fanout missing, the publish failed, a subscriber silent, an unreadable answer", async () => {
    const cases: { collect?: (p: Record<string, unknown>) => unknown; detail: string }[] = [
      { collect: undefined, detail: "before-call hook unavailable: function_not_found" },
      {
        collect: () => ({
          event_id: "e",
          replies: [],
          merged: { block: false },
          publish: { ok: false, error: "queue down" },
          publish_failed: true,
        }),
        detail: "publish failed: queue down",
      },
      {
        collect: () => answer([{}], { publish: { ok: true, subscribers: 2 }, resolved_by: "deadline" }),
        detail: "1 of 2 subscribers did not answer",
      },
      { collect: () => "garbage", detail: "an unreadable answer" },
    ];
    for (const c of cases) {
      const s = stand({ bindings: [sub("g", BEFORE_FUNCTION_CALL_TOPIC)], collect: c.collect });
      const out = await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence());
      expect(out.kind).toBe("deny");
      if (out.kind !== "deny") continue;
      expect(out.result.details).toMatchObject({ status: "denied", denied_by: "gate_unavailable", function_id: "mail::send" });
      expect((out.result.details as { reason: string }).reason).toContain(c.detail);
    }
  });

  it("a failed presence lookup counts as subscribed: the hook is asked (and a missing hook-fanout then denies)", async () => {
    const s = stand({ failLookup: true });
    const out = await beforeFunctionCall(s.trigger, "s1", call, new SubscriberPresence());
    expect(s.count(PUBLISH_COLLECT)).toBe(1);
    expect(out.kind).toBe("deny");
  });
});

describe("after a call", () => {
  it("no subscriber: the result as it is, hook-fanout never called", async () => {
    const s = stand({ bindings: [sub("g", BEFORE_FUNCTION_CALL_TOPIC)], collect: () => answer([]) });
    expect(await afterFunctionCall(s.trigger, "s1", call, result, new SubscriberPresence())).toBe(result);
    expect(s.count(PUBLISH_COLLECT)).toBe(0);
  });

  it("the merged content, details and terminate become the result; the payload carries the result's fields", async () => {
    const s = stand({
      bindings: [sub("h", AFTER_FUNCTION_CALL_TOPIC)],
      collect: (p) =>
        answer([{ content: [{ type: "text", text: "[redacted]" }] }], {
          merged: {
            ...(p.payload as object),
            content: [{ type: "text", text: "[redacted]" }],
            details: { sent: true, scrubbed: true },
            terminate: true,
          },
        }),
    });
    const out = await afterFunctionCall(s.trigger, "s1", call, result, new SubscriberPresence());
    expect(out).toEqual({ content: [{ type: "text", text: "[redacted]" }], details: { sent: true, scrubbed: true }, terminate: true });
    const req = s.calls.find((c) => c.function_id === PUBLISH_COLLECT)!.payload as Record<string, unknown>;
    expect(req).toMatchObject({
      topic: AFTER_FUNCTION_CALL_TOPIC,
      merge_rule: "field_merge",
      payload: { session_id: "s1", function_call: call, content: result.content, details: result.details, is_error: false },
    });
  });

  it("keeps the original result: no reply, a failed publish, hook-fanout missing, content that is no content list", async () => {
    const collects: (((p: Record<string, unknown>) => unknown) | undefined)[] = [
      () => answer([], { merged: { content: "x" } }),
      () => ({ event_id: "e", replies: [], merged: {}, publish: { ok: false, error: "down" }, publish_failed: true }),
      undefined,
    ];
    for (const collect of collects) {
      const s = stand({ bindings: [sub("h", AFTER_FUNCTION_CALL_TOPIC)], collect });
      expect(await afterFunctionCall(s.trigger, "s1", call, result, new SubscriberPresence())).toBe(result);
    }
    const s = stand({
      bindings: [sub("h", AFTER_FUNCTION_CALL_TOPIC)],
      collect: () => answer([{ content: "x" }], { merged: { content: "x", details: result.details } }),
    });
    expect(await afterFunctionCall(s.trigger, "s1", call, result, new SubscriberPresence())).toEqual(result);
  });
});
