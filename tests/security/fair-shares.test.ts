// Fair shares: one principal cannot fill what every principal shares. Each attack is performed
// against `npm start` with AUTH_SECRET (with lowered bounds, so the attack is small enough to run
// here): the attacker is refused at once with a typed error, every other principal keeps being
// served, and nothing of theirs changes.
// - open calls: one token's many sockets hold at most its share of the call table, and tokens
//   together leave the trusted reserve, so the harness still starts and runs a turn;
// - owned queues: a token that does not serve a queue's consumer functions cannot put messages on
//   it (the harness's `turn-step`, the engine's own `state:<trigger>` queues);
// - state: a per-principal quota of keys and bytes, kept through a restart; deletes free it;
// - connections: one token's worker and stream sockets over every namespace together, slots given
//   back on close and recovered after a restart that dropped sockets without a close.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_OPEN_CALLS_PER_CALLER, openCallLimits } from "@iii-edge/engine-do/core/bounds.ts";
import { TEST_AUTH_SECRET, bearer, token } from "@iii-edge/test-support/auth";
import { configuredQueues, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { NO_REPLY, RawSocket, flood, upgradeStatus, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually, until } from "@iii-edge/test-support/wait";
import { TURN_DEADLINE_MS, user } from "../harness/turn-client.ts";

/** The call table of this engine: small, so filling it takes a few thousand calls. */
const TOTAL_CALLS = 2_000;
const LIMITS = openCallLimits(TOTAL_CALLS);
/** The state quota of this engine: 20 keys, 5 MiB per principal. */
const QUOTA_KEYS = 20;
const QUOTA_BYTES = 5 * 1024 * 1024;
/** Connections one token may hold over every namespace, on this engine. */
const EVERYWHERE = 6;
/** One value of the attack (~1 MB of JSON text). */
const MB_VALUE = "x".repeat(1_000_000);

/** wrangler.toml's queues, plus an owned queue whose consumers are `own::*`. */
function queuesWithOwned(): string {
  const queues = JSON.parse(configuredQueues()) as Record<string, unknown>;
  queues.owned = { backend: "durable", consumers: ["own::*"] };
  return JSON.stringify(queues);
}

let replay: ReplayServer;
let engine: EngineServer;
const open: RawSocket[] = [];

async function connect(sub: string, grant: Parameters<typeof token>[1] = {}): Promise<RawSocket> {
  const s = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token(sub, grant)));
  open.push(s);
  return s;
}

const refusedOf = (socks: RawSocket[]) =>
  socks.reduce((n, s) => n + s.received.filter((f) => f.type === "invocationresult" && f.error?.code === "too_many_calls").length, 0);

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({
    env: { AUTH_SECRET: TEST_AUTH_SECRET, OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-test" },
    vars: {
      MAX_OPEN_CALLS: String(TOTAL_CALLS),
      MAX_STATE_KEYS_PER_PRINCIPAL: String(QUOTA_KEYS),
      MAX_STATE_BYTES_PER_PRINCIPAL: String(QUOTA_BYTES),
      MAX_CONNECTIONS_PER_TOKEN_ACROSS_NAMESPACES: String(EVERYWHERE),
      QUEUES: queuesWithOwned(),
    },
  });
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => {});
  await engine?.stop();
  await replay?.close();
});

describe("open calls: a share per principal, and a reserve for trusted callers", () => {
  it("three sockets of one token hold at most its share; other tokens are served; tokens together leave the harness room to run a turn", async () => {
    expect(LIMITS.perPrincipal).toBeLessThan(TOTAL_CALLS - LIMITS.trustedReserve);
    const hung = await connect("hung");
    hung.serve("slow::never", () => NO_REPLY);
    const healthy = await connect("healthy");
    healthy.serve("ok::echo", (d) => d);
    const bystander = await connect("bystander");
    await eventually(async () => (await bystander.call("ok::echo", { x: 1 })).result?.x === 1, 10_000, "ok::echo");

    // The attack: one token, three sockets, each at its own per-connection bound.
    const hog = [await connect("hog"), await connect("hog"), await connect("hog")];
    const hogCalls = hog.map((s) => flood(s, "slow::never", MAX_OPEN_CALLS_PER_CALLER));
    const refused = await eventually(
      () => {
        const n = refusedOf(hog);
        return n >= hog.length * MAX_OPEN_CALLS_PER_CALLER - LIMITS.perPrincipal ? n : false;
      },
      30_000,
      "the hog's refusals",
    );
    expect(refused).toBe(hog.length * MAX_OPEN_CALLS_PER_CALLER - LIMITS.perPrincipal);
    const message = hog.flatMap((s) => s.received).find((f) => f.error?.code === "too_many_calls")?.error?.message as string;
    expect(message).toContain("'hog'");

    // Another token is served at once, and its own calls still get into the table.
    expect((await bystander.call("ok::echo", { y: 2 })).result).toEqual({ y: 2, _caller_worker_id: bystander.workerId });
    expect((await bystander.call("slow::never", {}, { timeout_ms: 300 })).error?.code).toBe("timeout");

    // Tokens together: three more tokens ask for their whole shares; only what principals may hold
    // together is taken, the rest is refused, and then any token's call is refused...
    const others = [await connect("p2"), await connect("p3"), await connect("p4")];
    const shared = TOTAL_CALLS - LIMITS.trustedReserve;
    const otherCalls = others.map((s) => flood(s, "slow::never", LIMITS.perPrincipal));
    const extra = others.length * LIMITS.perPrincipal - (shared - LIMITS.perPrincipal);
    expect(
      await eventually(() => (refusedOf(others) >= extra ? refusedOf(others) : false), 30_000, "the principals' part of the table filled"),
    ).toBe(extra);
    const late = await bystander.call("ok::echo", { z: 3 });
    expect(late.error?.code).toBe("too_many_calls");
    expect(late.error?.message).toContain(`${shared} calls open`);

    // ...but the reserve is untouched: the harness (a trusted edge host) starts and runs a whole turn.
    replay.enqueue("openai", reply(say("still served")));
    const harness = await token("console-user", { ns: ["default"], call: ["harness::*"] });
    const send = (p: string, body?: unknown) =>
      fetch(`${engine.url}/${p}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { "content-type": "application/json", ...bearer(harness) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    await until(async () => (await send("api/turns/none")).status === 404 || undefined, "the harness routes", 30_000, 200);
    const sid = "fair-share-turn";
    const started = await send("api/turns", {
      session_id: sid,
      payload: { session_id: sid, model: "gpt-4o", provider: "openai", messages: [user("hello")] },
    });
    expect(started.status, await started.clone().text()).toBe(200);
    await until(
      async () => {
        const res = await send(`api/turns/${sid}`);
        return res.status === 200 && ((await res.json()) as { state: string }).state === "stopped";
      },
      `session ${sid} stopped`,
      TURN_DEADLINE_MS,
    );

    // The held calls end when their target goes; every caller gets an answer, and the shares are free.
    await hung.close();
    const results = (await Promise.all([...hogCalls, ...otherCalls])).flat();
    expect(results.filter((r) => r.error?.code === "invocation_stopped").length).toBe(shared);
    expect((await bystander.call("ok::echo", { w: 4 })).result?.w).toBe(4);
    expect((await hog[0]!.call("ok::echo", { w: 5 })).result?.w).toBe(5);
  }, 180_000);
});

describe("owned queues take messages only from their owner", () => {
  it("a token that does not serve a queue's consumers cannot queue on it, by any path; nothing is stored; the owner can", async () => {
    const owner = await connect("queue-owner");
    const ran: unknown[] = [];
    owner.serve("own::job", (d) => {
      ran.push(d);
      return { done: true };
    });
    const mallory = await connect("mallory");
    mallory.serve("mallory::slow", () => NO_REPLY);
    await eventually(async () => (await mallory.call("engine::functions::info", { function_id: "own::job" })).result, 10_000, "own::job");
    await eventually(
      async () => (await mallory.call("engine::functions::info", { function_id: "mallory::slow" })).result,
      10_000,
      "mallory::slow",
    );
    const depth = async (topic: string) => (await owner.ok<{ depth: unknown }>("engine::queue::topic_stats", { topic })).depth;
    const before = { turnStep: await depth("turn-step"), owned: await depth("owned") };

    const attempts: [string, Frame][] = [
      // Its own slow function on the harness's fifo (the attack: 100 of these stalled every turn).
      [
        "mallory::slow on turn-step",
        await mallory.call("mallory::slow", { session_id: "victim" }, { action: { type: "enqueue", queue: "turn-step" } }),
      ],
      // The harness's own step function, replayed.
      [
        "turn::provision on turn-step",
        await mallory.call("turn::provision", { session_id: "victim", step: 1 }, { action: { type: "enqueue", queue: "turn-step" } }),
      ],
      [
        "engine::queue::enqueue on turn-step",
        await mallory.call("engine::queue::enqueue", {
          queue: "turn-step",
          function_id: "turn::provision",
          data: { session_id: "victim", step: 1 },
        }),
      ],
      // Someone else's consumer on an owned queue, and its own function there.
      ["own::job on owned", await mallory.call("own::job", { forged: true }, { action: { type: "enqueue", queue: "owned" } })],
      ["mallory::slow on owned", await mallory.call("mallory::slow", {}, { action: { type: "enqueue", queue: "owned" } })],
      // A forged state fire on the engine's own queue.
      [
        "a state trigger queue",
        await mallory.call("engine::queue::enqueue", { queue: "state:some-binding", function_id: "own::job", data: { forged: true } }),
      ],
    ];
    for (const [what, r] of attempts) expect(r.error?.code, what).toBe("forbidden");

    // A state write carrying the enqueue: refused as a whole, the value is not stored either.
    const write = await mallory.call("state::set", {
      scope: "fair",
      key: "with-enqueue",
      value: 1,
      enqueue: { queue: "turn-step", function_id: "turn::provision", payload: { session_id: "victim", step: 1 } },
    });
    expect(write.error?.code).toBe("forbidden");
    expect((await mallory.call("state::get", { scope: "fair", key: "with-enqueue" })).result).toBeUndefined();

    expect({ turnStep: await depth("turn-step"), owned: await depth("owned") }).toEqual(before);
    expect(ran).toEqual([]);

    // The owner queues its own consumer, and it runs.
    expect((await owner.call("own::job", { real: true }, { action: { type: "enqueue", queue: "owned" } })).error).toBeUndefined();
    await eventually(() => ran.length === 1, 10_000, "own::job delivered");
    expect(ran[0]).toMatchObject({ real: true });
  });
});

/** A browser stream socket of `sub` in namespace `ns` (resolves once open). */
async function openStream(ns: string, sub: string): Promise<{ close(): Promise<void> }> {
  const ws = new WebSocket(`${engine.wsUrl}/ns/${ns}/_iii/streams`, { headers: bearer(await token(sub)) } as unknown as string[]);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open a stream socket in ${ns}`)), { once: true });
  });
  const handle = {
    close: () =>
      new Promise<void>((resolve) => {
        if (ws.readyState === WebSocket.CLOSED) return resolve();
        ws.addEventListener("close", () => resolve(), { once: true });
        ws.close(1000, "done");
      }),
  };
  open.push(handle as unknown as RawSocket);
  return handle;
}

const at = (ns: string) => (ns === "default" ? `${engine.wsUrl}/` : `${engine.wsUrl}/ns/${ns}`);
const socket = async (sub: string, ns: string) => {
  const s = await RawSocket.open(at(ns), bearer(await token(sub)));
  open.push(s);
  return s;
};
/** The token's sockets spread over four namespaces, one of them a stream socket. */
const spread = async (sub: string) => [
  await socket(sub, "ns-a"),
  await socket(sub, "ns-a"),
  await socket(sub, "ns-b"),
  await socket(sub, "ns-c"),
  await socket(sub, "default"),
  await openStream("ns-d", sub),
];

/** An engine restart costs 10–20 s on a loaded machine, so the file restarts its engine once: the
 * state quota is checked across it, and the "crasher" token's sockets, opened just before it, are
 * dropped by it without a close (checked by the last connections case). */
let crasherSpreadBeforeRestart = 0;

describe("state has a per-principal quota of keys and bytes", () => {
  it("26 values of 1 MB: the quota's worth is stored, the rest is quota_exceeded with nothing stored; others write; deletes free it; a restart keeps it", async () => {
    const hoarder = await connect("hoarder");
    const other = await connect("other-writer");
    await other.ok("state::set", { scope: "theirs", key: "k", value: { mine: true } });

    // 26 MB in a row is over a control socket's byte budget (8 MiB/s, bursts of 16): a call the
    // budget drops is answered rate_limited and sent again a moment later, as a well-behaved client
    // would, so what is measured here is the quota alone.
    const paced = async (s: RawSocket, function_id: string, data: unknown): Promise<{ code: string; result?: unknown }> => {
      for (let attempt = 0; ; attempt++) {
        const r = await s.call(function_id, data, {}, 30_000);
        if (r.error?.code !== "rate_limited" || attempt >= 50) return { code: r.error?.code ?? "ok", result: r.result };
        await new Promise((done) => setTimeout(done, 200));
      }
    };
    const codes: string[] = [];
    for (let i = 0; i < 26; i++) codes.push((await paced(hoarder, "state::set", { scope: "hoard", key: `v${i}`, value: MB_VALUE })).code);
    const fits = Math.floor(QUOTA_BYTES / (MB_VALUE.length + 2 + "hoard".length + 3));
    expect(codes.filter((c) => c === "ok").length).toBe(fits);
    expect(codes.slice(fits).every((c) => c === "quota_exceeded")).toBe(true);
    const keys = (await paced(hoarder, "state::list_keys", { scope: "hoard" })).result as { keys: string[] };
    expect(keys.keys).toHaveLength(fits);
    // An update over the quota is refused the same way and changes nothing.
    expect(
      (await paced(hoarder, "state::update", { scope: "hoard", key: "grow", ops: [{ type: "set", path: "", value: MB_VALUE }] })).code,
    ).toBe("quota_exceeded");
    expect((await paced(hoarder, "state::get", { scope: "hoard", key: "grow" })).result).toBeUndefined();

    // Another principal is unaffected; its value is as it was.
    expect((await paced(other, "state::set", { scope: "theirs", key: "k2", value: MB_VALUE })).code).toBe("ok");
    expect((await paced(other, "state::get", { scope: "theirs", key: "k" })).result).toEqual({ mine: true });

    // A delete frees the quota.
    expect((await paced(hoarder, "state::delete", { scope: "hoard", key: "v0" })).code).toBe("ok");
    expect((await paced(hoarder, "state::set", { scope: "hoard", key: "again", value: MB_VALUE })).code).toBe("ok");
    expect((await paced(hoarder, "state::set", { scope: "hoard", key: "more", value: MB_VALUE })).code).toBe("quota_exceeded");

    // Keys: a principal holds at most QUOTA_KEYS of them, however small.
    const counter = await connect("many-keys");
    const small: string[] = [];
    for (let i = 0; i < QUOTA_KEYS + 5; i++)
      small.push((await counter.call("state::set", { scope: "small", key: `k${i}`, value: i })).error?.code ?? "ok");
    expect(small.filter((c) => c === "ok")).toHaveLength(QUOTA_KEYS);
    expect(small.slice(QUOTA_KEYS).every((c) => c === "quota_exceeded")).toBe(true);
    // Rewriting a key it holds takes no new key.
    expect((await counter.call("state::set", { scope: "small", key: "k0", value: "changed" })).error).toBeUndefined();

    // The quota is in the object's SQLite: after a restart it is still held. The crasher's sockets
    // are open across it, and the restart drops them without a close.
    crasherSpreadBeforeRestart = (await spread("crasher")).length;
    await engine.restart();
    const again = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token("many-keys")));
    open.push(again);
    expect((await again.call("state::set", { scope: "small", key: "after-restart", value: 1 })).error?.code).toBe("quota_exceeded");
    await again.ok("state::delete", { scope: "small", key: "k1" });
    expect((await again.call("state::set", { scope: "small", key: "after-restart", value: 1 })).error).toBeUndefined();
  }, 120_000);
});

describe("connections are capped per principal over every namespace", () => {
  it(`a token allowed every namespace holds at most ${EVERYWHERE} connections in all; others connect; a closed one frees its slot`, async () => {
    const roamer = await spread("roamer");
    expect(roamer).toHaveLength(EVERYWHERE);
    for (const ns of ["ns-e", "ns-a", "default"]) {
      const over = await upgradeStatus(at(ns), bearer(await token("roamer")));
      expect(over.status, ns).toBe(429);
      expect(over.body?.error?.code).toBe("too_many_connections");
      expect(over.body?.error?.message).toContain("over all namespaces");
    }
    // A stream socket is refused the same way.
    await expect(openStream("ns-e", "roamer")).rejects.toThrow();
    // Another token is unaffected.
    await socket("settler", "ns-e");

    // Closing gives the slot back (the release is asynchronous: poll).
    await roamer[0]!.close();
    const back = await eventually(() => socket("roamer", "ns-e").catch(() => undefined), 10_000, "the freed slot");
    expect((await upgradeStatus(at("ns-f"), bearer(await token("roamer")))).status).toBe(429);
    await back.close();
    for (const s of roamer.slice(1)) await s.close();
  });

  it("opening and closing many leaves nothing held: the full quota opens again, and the namespace object counts no one", async () => {
    const base = ((await (await fetch(`${engine.url}/healthz`)).json()) as { engine: { workers: number } }).engine.workers;
    for (let round = 0; round < 5; round++) {
      const socks = await eventually(() => spread("cycler").catch(() => undefined), 10_000, `round ${round}`);
      for (const s of socks) await s.close();
    }
    const last = await eventually(() => spread("cycler").catch(() => undefined), 10_000, "the last round");
    expect((await upgradeStatus(at("ns-a"), bearer(await token("cycler")))).status).toBe(429);
    for (const s of last) await s.close();
    await eventually(
      async () => ((await (await fetch(`${engine.url}/healthz`)).json()) as { engine: { workers: number } }).engine.workers === base,
      10_000,
      "the default namespace back to its workers",
    );
  });

  it("slots of sockets a restart dropped without a close are recovered; the cap still holds after", async () => {
    // The crasher held its whole share when the state case restarted the engine under it.
    expect(crasherSpreadBeforeRestart, "the state case opened the crasher's sockets before its restart").toBe(EVERYWHERE);
    // The counter still lists the dropped sockets; the next refusal checks them with their namespaces.
    const again = await spread("crasher");
    expect(again).toHaveLength(EVERYWHERE);
    expect((await upgradeStatus(at("ns-z"), bearer(await token("crasher")))).status).toBe(429);
  }, 120_000);
});
