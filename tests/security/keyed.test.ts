// A keyed function is governed like any function (docs/keyed-workers.md), against `npm start` with
// AUTH_SECRET: a token whose call globs leave it out is refused before any instance is reached (over
// the socket, HTTP and an enqueue); a token that may call it reaches its instance; and its id
// belongs to whoever serves it (the deployment's keyed counter here): another worker cannot take it.
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
const clients: IIIClient[] = [];
const uid = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

async function client(name: string, grant: Parameters<typeof token>[1] = {}): Promise<IIIClient> {
  const c = registerWorker(`${engine.wsUrl}/`, {
    workerName: name,
    otel: { enabled: false },
    enableMetricsReporting: false,
    invocationTimeoutMs: 10_000,
    headers: bearer(await token(name, grant)),
  });
  clients.push(c);
  return c;
}

beforeAll(async () => {
  engine = await startSecureEngine();
});
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.shutdown()));
  await engine?.stop();
});

describe("keyed functions under tokens and ownership", () => {
  it("a token without the function in its call globs is refused; one with it reaches the instance", async () => {
    const user_id = uid("sec");
    const allowed = await client("keyed-allowed", { call: ["counter::*"] });
    const other = await client("keyed-other", { call: ["math::*"] });
    expect(await allowed.trigger({ function_id: "counter::add", payload: { user_id, by: 2 } })).toEqual({ user_id, count: 2 });
    await expect(other.trigger({ function_id: "counter::add", payload: { user_id, by: 5 } })).rejects.toMatchObject({ code: "forbidden" });
    await expect(
      other.trigger({ function_id: "counter::add", payload: { user_id, by: 5 }, action: { type: "enqueue", queue: "jobs" } }),
    ).rejects.toMatchObject({ code: "forbidden" });
    const http = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(await token("keyed-http", { call: ["math::*"] })) },
      body: JSON.stringify({ function_id: "counter::add", payload: { user_id, by: 5 } }),
    });
    expect(http.status).toBe(403);
    expect(await allowed.trigger({ function_id: "counter::get", payload: { user_id } })).toEqual({ user_id, count: 2 });
  });

  it("another worker cannot take a keyed function's id", async () => {
    const thief = await client("keyed-thief");
    let stolen = 0;
    thief.registerFunction("counter::add", async () => {
      stolen++;
      return { user_id: "stolen", count: -1 };
    });
    const user_id = uid("owned");
    const caller = await client("keyed-caller");
    // Calls keep reaching the deployment's counter, never the thief's handler.
    for (let i = 1; i <= 3; i++) {
      expect(await caller.trigger({ function_id: "counter::add", payload: { user_id } })).toEqual({ user_id, count: i });
    }
    const listed = await until(
      async () =>
        (
          (await caller.trigger({ function_id: "engine::functions::info", payload: { function_id: "counter::add" } })) as {
            served_by?: string;
          }
        ).served_by,
      "counter::add's info",
    );
    expect(listed).toBe("deployment");
    expect(stolen).toBe(0);
  });
});
