// Bounds that stop one caller from holding the engine (open calls, connection floods),
// against `npm start` with AUTH_SECRET: each limit answers the caller at once with a typed error,
// and every other worker keeps being served. One target's bound over all its callers is engine-core
// behaviour: tests/unit/hostile-frames.test.ts runs it on the engine core in-process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_OPEN_CALLS_PER_CALLER } from "@iii-edge/engine-do/core/bounds.ts";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { NO_REPLY, RawSocket, flood, upgradeStatus } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
const open: RawSocket[] = [];
const PER_TOKEN = 5;
const PER_IP = 8;

async function connect(sub: string, headers: Record<string, string> = {}): Promise<RawSocket> {
  const s = await RawSocket.open(`${engine.wsUrl}/`, { ...bearer(await token(sub)), ...headers });
  open.push(s);
  return s;
}

beforeAll(async () => {
  engine = await startSecureEngine({ MAX_CONNECTIONS_PER_TOKEN: String(PER_TOKEN), MAX_CONNECTIONS_PER_IP: String(PER_IP) });
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => {});
  await engine?.stop();
});

describe("open calls are bounded", () => {
  it("10,000 calls to a worker that never answers: the excess is refused at once, everyone else is served, and the rest end when it leaves", async () => {
    const hung = await connect("hung");
    hung.serve("slow::never", () => NO_REPLY);
    const healthy = await connect("healthy");
    healthy.serve("ok::echo", (d) => d);
    const flooder = await connect("flooder");
    const bystander = await connect("bystander");
    await eventually(async () => (await bystander.call("ok::echo", { x: 1 })).result?.x === 1, 10_000, "ok::echo");

    const all = flood(flooder, "slow::never", 10_000);
    // Refusals come back at once, long before any deadline.
    const refused = await eventually(
      () => {
        const n = flooder.received.filter((f) => f.type === "invocationresult" && f.error?.code === "too_many_calls").length;
        return n >= 10_000 - MAX_OPEN_CALLS_PER_CALLER ? n : false;
      },
      30_000,
      "too_many_calls refusals",
    );
    expect(refused).toBe(10_000 - MAX_OPEN_CALLS_PER_CALLER);

    // Meanwhile: other callers, the health check, state and the durable queue all still work.
    const t0 = Date.now();
    expect((await bystander.call("ok::echo", { y: 2 })).result).toEqual({ y: 2, _caller_worker_id: bystander.workerId });
    expect((await fetch(`${engine.url}/healthz`)).status).toBe(200);
    await bystander.ok("state::set", { scope: "limits", key: "k", value: 1 });
    const queued = await bystander.call("ok::echo", { via: "queue" }, { action: { type: "enqueue", queue: "jobs" } });
    expect(queued.error).toBeUndefined();
    expect(Date.now() - t0).toBeLessThan(5_000);

    // The held calls end when the target goes: every caller gets an answer.
    await hung.close();
    const results = await all;
    const codes = new Map<string, number>();
    for (const r of results) codes.set(r.error?.code ?? "ok", (codes.get(r.error?.code ?? "ok") ?? 0) + 1);
    expect(Object.fromEntries(codes)).toEqual({
      too_many_calls: 10_000 - MAX_OPEN_CALLS_PER_CALLER,
      invocation_stopped: MAX_OPEN_CALLS_PER_CALLER,
    });
  });
});

describe("connections are bounded per token and per address", () => {
  it(`a token holds at most ${PER_TOKEN} connections; the next gets 429 too_many_connections, others are unaffected`, async () => {
    const t = await token("fleet");
    const mine: RawSocket[] = [];
    for (let i = 0; i < PER_TOKEN; i++) mine.push(await RawSocket.open(`${engine.wsUrl}/`, bearer(t)));
    open.push(...mine);
    const over = await upgradeStatus(`${engine.wsUrl}/`, bearer(t));
    expect(over.status).toBe(429);
    expect(over.body?.error?.code).toBe("too_many_connections");
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(await token("someone-else")))).status).toBe(101);
    await mine[0]!.close();
    await eventually(async () => (await upgradeStatus(`${engine.wsUrl}/`, bearer(t))).status === 101, 10_000, "a slot free again");
  });

  it(`one client address holds at most ${PER_IP} connections`, async () => {
    // Locally the front door reads the client address from CF-Connecting-IP like Cloudflare sets it.
    const ip = { "CF-Connecting-IP": "198.51.100.7" };
    for (let i = 0; i < PER_IP; i++) open.push(await RawSocket.open(`${engine.wsUrl}/`, { ...bearer(await token(`ip-${i}`)), ...ip }));
    const over = await upgradeStatus(`${engine.wsUrl}/`, { ...bearer(await token("ip-extra")), ...ip });
    expect(over.status).toBe(429);
    expect(over.body?.error?.code).toBe("too_many_connections");
    expect(
      (await upgradeStatus(`${engine.wsUrl}/`, { ...bearer(await token("ip-extra")), "CF-Connecting-IP": "198.51.100.8" })).status,
    ).toBe(101);
  });
});

// Registrations per token across connections: tests/security/bounds.test.ts.
