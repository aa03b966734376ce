// Bindings must not outlive their maker, performed against `npm start` with AUTH_SECRET: Bob binds
// a public route and a per-second schedule to Alice's function with engine::register_trigger and
// leaves. The bindings must end with his last connection (unless his grant says
// `durable_bindings`), and Alice, who owns the function, must be able to see and remove bindings to
// it whoever made them, while a third principal cannot.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let alice: RawSocket;
/** Calls of Alice's function, in order of arrival, by what ran it. */
const aliceCalls: unknown[] = [];
/** Fires of Alice's own per-second clock: the yardstick for "a second has passed". */
let clockTicks = 0;
const open: RawSocket[] = [];

async function connect(sub: string, grant: Parameters<typeof token>[1] = {}): Promise<RawSocket> {
  const s = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token(sub, grant)));
  open.push(s);
  return s;
}

async function invokeHttp(body: unknown, headers: Record<string, string>): Promise<{ status: number; body: Frame }> {
  const res = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Frame };
}

type Listed = { id: string; trigger_type: string; function_id: string; made_by?: string | null; durable?: boolean };
/** Bindings to Alice's function, as its owner reads them. */
async function bindingsToAlice(): Promise<Listed[]> {
  const r = await alice.ok<{ registered_triggers: Listed[] }>("engine::registered-triggers::list", { function_id: "alice::work" });
  return r.registered_triggers;
}
const ids = (l: Listed[]) => l.map((t) => t.id).sort();

/** Wait until Alice's own clock has ticked `n` more times (cron fires once a second). */
async function seconds(n: number): Promise<void> {
  const target = clockTicks + n;
  await eventually(() => clockTicks >= target, 15_000, `${n} clock ticks`);
}

beforeAll(async () => {
  engine = await startSecureEngine();
  alice = await connect("alice", { register: ["alice::"] });
  alice.serve("alice::work", (d) => {
    aliceCalls.push(d);
    return { status_code: 200, body: { ran: "alice::work" } };
  });
  alice.serve("alice::clock", () => {
    clockTicks++;
    return null;
  });
  await alice.ok("engine::register_trigger", {
    id: "alice-clock",
    trigger_type: "cron",
    function_id: "alice::clock",
    config: { expression: "* * * * * *" },
  });
  await seconds(1);
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => {});
  await engine?.stop();
});

describe("a binding made with engine::register_trigger ends with its maker", () => {
  it("Bob's route and per-second cron on Alice's function stop when his last connection closes; an anonymous GET no longer runs it", async () => {
    const before = ids(await bindingsToAlice());
    const bob = await connect("bob");
    const bobAgain = await connect("bob");
    await bob.ok("engine::register_trigger", {
      id: "bob-route",
      trigger_type: "http",
      function_id: "alice::work",
      config: { api_path: "sec/bound/alice", http_method: "GET" },
    });
    await bob.ok("engine::register_trigger", {
      id: "bob-cron",
      trigger_type: "cron",
      function_id: "alice::work",
      config: { expression: "* * * * * *" },
    });

    // The attack works while Bob is here: anyone's GET and the schedule run Alice's function.
    const anon = await fetch(`${engine.url}/sec/bound/alice`);
    expect(anon.status).toBe(200);
    expect(await anon.json()).toEqual({ ran: "alice::work" });
    const firing = aliceCalls.length;
    await eventually(() => aliceCalls.length >= firing + 2, 15_000, "Bob's cron firing Alice's function");
    const listed = await bindingsToAlice();
    expect(listed.filter((t) => t.id.startsWith("bob-"))).toEqual([
      expect.objectContaining({ id: "bob-cron", made_by: "bob", durable: false }),
      expect.objectContaining({ id: "bob-route", made_by: "bob", durable: false }),
    ]);

    // One of Bob's two connections closes: he is still here, so are his bindings.
    await bob.close();
    await seconds(1);
    expect((await fetch(`${engine.url}/sec/bound/alice`)).status).toBe(200);
    expect(ids(await bindingsToAlice())).toEqual([...before, "bob-cron", "bob-route"].sort());

    // His last connection closes: both bindings end.
    await bobAgain.close();
    await eventually(async () => (await fetch(`${engine.url}/sec/bound/alice`)).status === 404, 10_000, "Bob's route gone");
    expect(ids(await bindingsToAlice())).toEqual(before);
    const jobs = await alice.ok<{ jobs: { job_id: string }[] }>("engine::cron::jobs", {});
    expect(jobs.jobs.map((j) => j.job_id)).not.toContain("bob-cron");
    // A fire already under way may still land; after that, seconds pass and Alice's count stays.
    await seconds(1);
    const settled = aliceCalls.length;
    await seconds(2);
    expect(aliceCalls.length).toBe(settled);
    const gone = await fetch(`${engine.url}/sec/bound/alice`);
    expect(gone.status).toBe(404);
    expect(aliceCalls.length).toBe(settled);
  });

  it("a caller with no connection here cannot make one that would never end; nothing is stored", async () => {
    const before = ids(await bindingsToAlice());
    const r = await invokeHttp(
      {
        function_id: "engine::register_trigger",
        payload: { id: "bob-http", trigger_type: "cron", function_id: "alice::work", config: { expression: "* * * * * *" } },
      },
      bearer(await token("bob-over-http")),
    );
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe("forbidden");
    expect(ids(await bindingsToAlice())).toEqual(before);
  });

  it("a grant with durable_bindings makes bindings that stay after its maker leaves, and says so", async () => {
    const ops = await connect("ops", { durable_bindings: true });
    await ops.ok("engine::register_trigger", {
      id: "ops-route",
      trigger_type: "http",
      function_id: "alice::work",
      config: { api_path: "sec/ops/alice", http_method: "GET" },
    });
    await ops.close();
    await seconds(1);
    expect((await fetch(`${engine.url}/sec/ops/alice`)).status).toBe(200);
    expect((await bindingsToAlice()).find((t) => t.id === "ops-route")).toMatchObject({ made_by: "ops", durable: true });
    // Over HTTP too (no connection needed: it outlives its maker anyway).
    const viaHttp = await invokeHttp(
      {
        function_id: "engine::register_trigger",
        payload: {
          id: "ops-http",
          trigger_type: "http",
          function_id: "alice::work",
          config: { api_path: "sec/ops/http", http_method: "GET" },
        },
      },
      bearer(await token("ops", { durable_bindings: true })),
    );
    expect(viaHttp.status).toBe(200);
    // Alice, who owns the function, removes both (she did not make them).
    expect(await alice.ok("engine::unregister_trigger", { id: "ops-route" })).toEqual({ removed: true });
    expect(await alice.ok("engine::unregister_trigger", { id: "ops-http" })).toEqual({ removed: true });
    expect((await fetch(`${engine.url}/sec/ops/alice`)).status).toBe(404);
  });
});

describe("the function's owner can list and remove bindings to it; nobody else can", () => {
  it("Alice sees and removes Bob's binding while Bob is connected; Carol cannot, over a socket, a frame or HTTP", async () => {
    const bob = await connect("bob");
    await bob.ok("engine::register_trigger", {
      id: "bob-cron-2",
      trigger_type: "cron",
      function_id: "alice::work",
      config: { expression: "* * * * * *" },
    });
    // Bob's connection's own binding (a frame) is Alice's to remove too.
    bob.send({
      type: "registertrigger",
      id: "bob-frame-route",
      trigger_type: "http",
      function_id: "alice::work",
      config: { api_path: "sec/frame/alice", http_method: "GET" },
    });
    await eventually(async () => (await fetch(`${engine.url}/sec/frame/alice`)).status === 200, 10_000, "Bob's frame route");
    const listed = await bindingsToAlice();
    expect(listed.find((t) => t.id === "bob-cron-2")).toMatchObject({ made_by: "bob", durable: false });
    expect(listed.find((t) => t.id === "bob-frame-route")).toMatchObject({ made_by: "bob", durable: false });
    const before = ids(listed);

    const carol = await connect("carol");
    expect((await carol.call("engine::unregister_trigger", { id: "bob-cron-2" })).error.code).toBe("forbidden");
    carol.send({ type: "unregistertrigger", id: "bob-frame-route" });
    expect((await carol.next((f) => f.type === "error")).error.code).toBe("forbidden");
    const viaHttp = await invokeHttp(
      { function_id: "engine::unregister_trigger", payload: { id: "bob-cron-2" } },
      bearer(await token("carol")),
    );
    expect(viaHttp.status).toBe(403);
    // Carol cannot take them over either: replacing a binding is for its maker only.
    const replace = await carol.call("engine::register_trigger", {
      id: "bob-cron-2",
      trigger_type: "cron",
      function_id: "alice::work",
      config: { expression: "0 0 1 1 *" },
    });
    expect(replace.error.code).toBe("forbidden");
    expect(ids(await bindingsToAlice())).toEqual(before);
    expect((await fetch(`${engine.url}/sec/frame/alice`)).status).toBe(200);

    // Alice can, both ways, with Bob still connected.
    expect(await alice.ok("engine::unregister_trigger", { id: "bob-cron-2" })).toEqual({ removed: true });
    alice.send({ type: "unregistertrigger", id: "bob-frame-route" });
    await eventually(
      async () => (await fetch(`${engine.url}/sec/frame/alice`)).status === 404,
      10_000,
      "Bob's frame route removed by Alice",
    );
    expect(ids(await bindingsToAlice()).filter((id) => id.startsWith("bob-"))).toEqual([]);
    expect(bob.closed).toBe(false);
    // Another connection of Alice's principal is her too.
    await bob.ok("engine::register_trigger", {
      id: "bob-cron-3",
      trigger_type: "cron",
      function_id: "alice::work",
      config: { expression: "0 0 1 1 *" },
    });
    const alice2 = await connect("alice", { register: ["alice::"] });
    expect(await alice2.ok("engine::unregister_trigger", { id: "bob-cron-3" })).toEqual({ removed: true });
  });
});
