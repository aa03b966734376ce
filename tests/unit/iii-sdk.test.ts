// The unmodified iii-sdk@0.22.1 against the engine core served in this process
// (@iii-edge/test-support/node-engine): two workers in this process and one in a child process,
// calling each other through the engine (protocol/README.md §12) — calls, errors, void and enqueue,
// state and its triggers, custom trigger types, discovery pushes, a channel between two workers, a
// worker killed mid-call. What
// only `npm start` has (the token on the handshake, /_iii/invoke, /otel) stays in
// tests/interop/sdk.test.ts.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { registerWorker, TriggerAction, type IIIClient } from "iii-sdk";
import type { ChannelReader } from "iii-sdk/channel";
import { createChannel } from "iii-sdk/helpers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { failure, listed, registered, sleep, until } from "../interop/sdk.ts";

// Waits for registrations and pushes (`until`) are the interop suite's: more than the unit
// project's 5 s default on a loaded machine.
vi.setConfig({ testTimeout: 30_000 });

let engine: NodeEngine;
let a: IIIClient;
let b: IIIClient;
const seen: { fn: string; data: unknown; metadata: unknown }[] = [];

const worker = (name: string) => registerWorker(engine.wsUrl, { workerName: name, otel: { enabled: false }, invocationTimeoutMs: 10_000 });

beforeAll(async () => {
  engine = await startNodeEngine();
  a = worker("interop-a");
  b = worker("interop-b");
  b.registerFunction(
    "b::add",
    async (data: { a: number; b: number }, metadata) => {
      seen.push({ fn: "b::add", data, metadata });
      return { sum: data.a + data.b };
    },
    { description: "adds a and b" },
  );
  b.registerFunction("b::fail", async () => {
    throw new Error("b::fail always throws");
  });
  b.registerFunction("b::record", async (data, metadata) => {
    seen.push({ fn: "b::record", data, metadata });
    return null;
  });
  a.registerFunction("a::upper", async (data: { s: string }) => ({ s: data.s.toUpperCase() }));
  a.registerFunction("a::via-b", async (data: { a: number; b: number }) => {
    // A call made inside a handler: worker → engine → worker → engine → worker.
    const r = (await a.trigger({ function_id: "b::add", payload: data })) as { sum: number };
    return { doubled: r.sum * 2 };
  });
  await registered(a, "b::add", "b::fail", "b::record", "a::upper", "a::via-b");
});

afterAll(async () => {
  await Promise.allSettled([a?.shutdown(), b?.shutdown()]);
  await engine?.stop();
});

describe("calls between SDK workers", () => {
  it("sync calls both ways, nested calls, metadata to the handler, _caller_worker_id in the payload", async () => {
    expect(await a.trigger({ function_id: "b::add", payload: { a: 2, b: 3 }, metadata: { tenant: "acme" } })).toEqual({ sum: 5 });
    const call = seen.find((s) => s.fn === "b::add")!;
    expect(call.metadata).toEqual({ tenant: "acme" });
    expect(call.data).toMatchObject({ a: 2, b: 3, _caller_worker_id: expect.any(String) });
    expect(await b.trigger({ function_id: "a::upper", payload: { s: "hi" } })).toEqual({ s: "HI" });
    expect(await b.trigger({ function_id: "a::via-b", payload: { a: 1, b: 2 } })).toEqual({ doubled: 6 });
  });

  it("a throwing handler rejects the caller with invocation_failed and the remote message", async () => {
    const e = await failure(a.trigger({ function_id: "b::fail", payload: {} }));
    expect(e.code).toBe("invocation_failed");
    expect(e.message).toContain("b::fail always throws");
  });

  it("an unknown function fails at once with function_not_found", async () => {
    const t0 = Date.now();
    const e = await failure(a.trigger({ function_id: "nobody::home", payload: {} }));
    expect(e.code).toBe("function_not_found");
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  it("void resolves at once with undefined and still runs the target", async () => {
    const n = seen.length;
    expect(await a.trigger({ function_id: "b::record", payload: { kind: "void" }, action: TriggerAction.Void() })).toBeUndefined();
    await until(() => seen.slice(n).some((s) => (s.data as { kind?: string }).kind === "void"), "the void call to run");
  });

  it("enqueue answers {messageReceiptId} and delivers the payload later", async () => {
    const n = seen.length;
    const r = (await a.trigger({
      function_id: "b::record",
      payload: { kind: "queued" },
      action: TriggerAction.Enqueue({ queue: "default" }),
    })) as { messageReceiptId: string };
    expect(r.messageReceiptId).toMatch(/^[0-9a-f-]{36}$/);
    const got = await until(() => seen.slice(n).find((s) => (s.data as { kind?: string }).kind === "queued"), "the queued delivery");
    expect(got.data).toEqual({ kind: "queued" });
    const e = await failure(
      a.trigger({ function_id: "b::record", payload: {}, action: TriggerAction.Enqueue({ queue: "no-such-queue" }) }),
    );
    expect(e.code).toBe("enqueue_error");
  });
});

describe("state", () => {
  it("set / get / update / list / list_groups / delete through trigger()", async () => {
    expect(await a.trigger({ function_id: "state::set", payload: { scope: "interop", key: "k", value: { n: 1 } } })).toEqual({
      old_value: null,
      new_value: { n: 1 },
    });
    expect(await b.trigger({ function_id: "state::get", payload: { scope: "interop", key: "k" } })).toEqual({ n: 1 });
    expect(await b.trigger({ function_id: "state::get", payload: { scope: "interop", key: "absent" } })).toBeUndefined();
    const up = (await a.trigger({
      function_id: "state::update",
      payload: {
        scope: "interop",
        key: "k",
        ops: [
          { type: "increment", path: "n", by: 4 },
          { type: "append", path: "log", value: 7 },
        ],
      },
    })) as { new_value: unknown };
    expect(up.new_value).toEqual({ n: 5, log: [7] });
    expect(await a.trigger({ function_id: "state::list", payload: { scope: "interop" } })).toEqual([{ n: 5, log: [7] }]);
    expect(((await a.trigger({ function_id: "state::list_groups", payload: {} })) as { groups: string[] }).groups).toContain("interop");
    expect(await a.trigger({ function_id: "state::delete", payload: { scope: "interop", key: "k" } })).toEqual({ n: 5, log: [7] });
    expect(await a.trigger({ function_id: "state::get", payload: { scope: "interop", key: "k" } })).toBeUndefined();
  });

  it("a state trigger delivers the §8.3 payload with the binding's metadata", async () => {
    const events: { data: unknown; metadata: unknown }[] = [];
    a.registerFunction("a::on-state", async (data, metadata) => {
      events.push({ data, metadata });
    });
    const trig = a.registerTrigger({
      type: "state",
      function_id: "a::on-state",
      config: { scope: "watched" },
      metadata: { from: "binding" },
    });
    await registered(a, "a::on-state");
    await until(async () => {
      const r = (await a.trigger({
        function_id: "engine::registered-triggers::list",
        payload: { trigger_type: "state", function_id: "a::on-state" },
      })) as { registered_triggers: unknown[] };
      return r.registered_triggers.length === 1;
    }, "the state binding");
    await b.trigger({ function_id: "state::set", payload: { scope: "watched", key: "x", value: 1 } });
    await b.trigger({ function_id: "state::set", payload: { scope: "ignored", key: "x", value: 1 } });
    await b.trigger({ function_id: "state::set", payload: { scope: "watched", key: "x", value: 2 } });
    await until(() => events.length >= 2, "two state events");
    expect(events.map((e) => e.data)).toEqual([
      { type: "state", event_type: "state:created", scope: "watched", key: "x", old_value: null, new_value: 1 },
      { type: "state", event_type: "state:updated", scope: "watched", key: "x", old_value: 1, new_value: 2 },
    ]);
    expect(events[0]!.metadata).toEqual({ from: "binding" });
    trig.unregister();
  });
});

describe("custom trigger types", () => {
  it("binding parked before the provider exists, delivered to it, fired by it, unregistered through it", async () => {
    const registrations: { id: string; function_id: string; config: unknown; metadata?: unknown }[] = [];
    const unregistrations: string[] = [];
    const fired: unknown[] = [];
    a.registerFunction("a::on-hook", async (data, metadata) => {
      fired.push({ data, metadata });
      return "handled";
    });
    // Bound before any provider: the engine parks it.
    const binding = a.registerTrigger({
      type: "interop::webhook",
      function_id: "a::on-hook",
      config: { path: "/orders" },
      metadata: { m: 1 },
    });
    await registered(a, "a::on-hook");
    b.registerTriggerType(
      { id: "interop::webhook", description: "test webhook" },
      {
        async registerTrigger(cfg) {
          registrations.push(cfg);
          // The provider fires the binding like any caller.
          await b.trigger({
            function_id: cfg.function_id,
            payload: { hook: (cfg.config as { path: string }).path },
            metadata: cfg.metadata,
          });
        },
        async unregisterTrigger(cfg) {
          unregistrations.push(cfg.id);
        },
      },
    );
    await until(() => fired.length === 1, "the provider to fire the parked binding");
    expect(registrations[0]).toMatchObject({ function_id: "a::on-hook", config: { path: "/orders" }, metadata: { m: 1 } });
    expect(fired[0]).toEqual({ data: { hook: "/orders", _caller_worker_id: expect.any(String) }, metadata: { m: 1 } });
    binding.unregister();
    await until(() => unregistrations.includes(registrations[0]!.id), "unregisterTrigger at the provider");
    const types = (await a.trigger({ function_id: "engine::triggers::list", payload: {} })) as {
      triggers: { id: string; worker_name: string }[];
    };
    expect(types.triggers).toContainEqual(expect.objectContaining({ id: "interop::webhook", worker_name: "interop-b" }));
  });

  it("the provider's refusal reaches the binding's owner (never silent)", async () => {
    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      b.registerTriggerType(
        { id: "interop::picky", description: "refuses everything" },
        {
          async registerTrigger() {
            throw new Error("picky says no");
          },
          async unregisterTrigger() {},
        },
      );
      await sleep(100);
      const binding = a.registerTrigger({ type: "interop::picky", function_id: "a::upper", config: {} });
      const logged = await until(
        () =>
          spy.mock.calls.map((c) => String(c[0])).find((m) => m.includes("Trigger registration failed") && m.includes("interop::picky")),
        "the owner to log the refusal",
      );
      expect(logged).toContain("picky says no");
      binding.unregister();
    } finally {
      spy.mockRestore();
    }
  });
});

describe("discovery", () => {
  it("engine::functions-available is pushed to a bound worker well under a second after a registration", async () => {
    const pushes: { at: number; ids: string[] }[] = [];
    a.registerFunction("a::on-functions", async (data: { functions: { function_id: string }[] }) => {
      pushes.push({ at: Date.now(), ids: data.functions.map((f) => f.function_id) });
    });
    a.registerTrigger({ type: "engine::functions-available", function_id: "a::on-functions", config: {} });
    await registered(a, "a::on-functions");
    await sleep(300);
    const n = pushes.length;
    const t0 = Date.now();
    b.registerFunction("b::brand-new", async () => "new");
    const push = await until(() => pushes.slice(n).find((p) => p.ids.includes("b::brand-new")), "the functions-available push", 3_000, 5);
    expect(push.at - t0).toBeLessThan(1_000);
  });

  it("engine::triggers-available reaches an iii-sdk worker (a call without invocation id) when a binding comes and goes", async () => {
    const pushes: string[][] = [];
    a.registerFunction("a::on-triggers", async (data: { event: string; triggers: { function_id: string }[] }) => {
      pushes.push(data.triggers.map((t) => t.function_id));
    });
    a.registerTrigger({ type: "engine::triggers-available", function_id: "a::on-triggers", config: {} });
    await registered(a, "a::on-triggers");
    await until(async () => {
      const r = (await a.trigger({
        function_id: "engine::registered-triggers::list",
        payload: { trigger_type: "engine::triggers-available", function_id: "a::on-triggers", include_internal: true },
      })) as { registered_triggers: unknown[] };
      return r.registered_triggers.length === 1;
    }, "the triggers-available binding");
    b.registerFunction("b::hooked", async () => null);
    const binding = b.registerTrigger({ type: "interop::announced", function_id: "b::hooked", config: { x: 1 } });
    await until(() => pushes.some((ids) => ids.includes("b::hooked")), "the push of the new binding", 5_000, 5);
    const seen = pushes.length;
    binding.unregister();
    await until(() => pushes.length > seen && !pushes.at(-1)!.includes("b::hooked"), "the push of its removal", 5_000, 5);
  });

  it("engine::workers::list shows both SDK workers with what they reported", async () => {
    const r = (await a.trigger({ function_id: "engine::workers::list", payload: {} })) as {
      workers: { name: string; runtime: string; version: string; pid: number; function_count: number }[];
    };
    const names = r.workers.map((w) => w.name);
    expect(names).toEqual(expect.arrayContaining(["interop-a", "interop-b"]));
    expect(r.workers.find((w) => w.name === "interop-b")).toMatchObject({ runtime: "node", version: "0.22.1", pid: process.pid });
    const fns = (await a.trigger({ function_id: "engine::functions::list", payload: {} })) as {
      functions: { function_id: string; worker_name: string; description?: string }[];
    };
    expect(fns.functions).toContainEqual({ function_id: "b::add", worker_name: "interop-b", description: "adds a and b" });
  });
});

describe("channels (iii-sdk/helpers createChannel)", () => {
  it("worker A writes text and binary to a channel; worker B reads them all through the reader ref", async () => {
    b.registerFunction("b::consume", async (input: { source: ChannelReader; expect_bytes: number }) => {
      const texts: string[] = [];
      input.source.onMessage((m) => texts.push(m));
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const chunk of input.source.stream) {
        chunks.push(chunk as Buffer);
        n += (chunk as Buffer).length;
        if (n >= input.expect_bytes) break;
      }
      const bytes = Buffer.concat(chunks);
      return { texts, length: bytes.length, head: bytes.subarray(0, 10).toString(), sum: bytes.reduce((s, x) => s + x, 0) };
    });
    await registered(a, "b::consume");
    const ch = await createChannel(a, 16);
    expect(ch.readerRef).toMatchObject({ channel_id: ch.writerRef.channel_id, direction: "read" });
    const result = a.trigger({ function_id: "b::consume", payload: { source: ch.readerRef, expect_bytes: 150_010 } });
    ch.writer.sendMessage(JSON.stringify({ type: "hello" }));
    ch.writer.stream.write(Buffer.from("binary one"));
    ch.writer.stream.write(Buffer.alloc(150_000, 1)); // the SDK splits this into 64 KiB frames
    ch.writer.stream.end();
    expect(await result).toEqual({
      texts: ['{"type":"hello"}'],
      length: 150_010,
      head: "binary one",
      sum: "binary one".split("").reduce((s, c) => s + c.charCodeAt(0), 0) + 150_000,
    });
  });
});

describe("a worker in another process", () => {
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "../interop/fixtures/hanging-worker.ts");
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });

  it("killed mid-call: the caller gets invocation_stopped within about a second, long before its SDK timeout", async () => {
    child = spawn(process.execPath, [fixture, engine.wsUrl], { stdio: ["ignore", "pipe", "pipe"] });
    await registered(a, "interop::child-hang", "interop::child-echo");
    expect(await a.trigger({ function_id: "interop::child-echo", payload: { x: 1 } })).toMatchObject({ echoed: { x: 1 }, pid: child.pid });

    const call = failure(a.trigger({ function_id: "interop::child-hang", payload: {}, timeoutMs: 20_000 }));
    // The call reached the child (the engine counts it as active there).
    await until(async () => {
      const r = (await a.trigger({ function_id: "engine::workers::list", payload: {} })) as {
        workers: { name: string; active_invocations: number }[];
      };
      return r.workers.find((w) => w.name === "interop-child")?.active_invocations === 1;
    }, "the call to be in flight at the child");
    const t0 = Date.now();
    child.kill("SIGKILL");
    const e = await call;
    const took = Date.now() - t0;
    expect(e.code).toBe("invocation_stopped");
    expect(took).toBeLessThan(1_500);
    // Its functions are gone, the engine carries on.
    await until(async () => !(await listed(a)).includes("interop::child-hang"), "the child's functions to be removed");
    expect(await a.trigger({ function_id: "b::add", payload: { a: 1, b: 1 } })).toEqual({ sum: 2 });
  });
});
