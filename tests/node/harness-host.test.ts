// The built-in harness workers composed in the engine Worker (deploy/harness.ts, the HARNESS
// service binding) under `npm start`: they start with the engine, and a HARNESS_DISABLE naming no
// worker keeps the host out with the reason in the log while the engine carries on.
import { afterEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { HARNESS_WORKERS } from "@iii-edge/test-support/harness-workers";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer | undefined;
afterEach(async () => {
  await engine?.stop();
  engine = undefined;
});

const call = async (e: EngineServer, function_id: string, payload: unknown = {}) => {
  const r = await fetch(`${e.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ function_id, payload }),
  });
  const body = (await r.json()) as { result?: unknown; error?: { code: string; message: string } };
  if (body.error) throw new Error(`${function_id}: ${body.error.code} ${body.error.message}`);
  return body.result;
};
const harnessFunctions = async (e: EngineServer) =>
  ((await call(e, "engine::functions::list")) as { functions: { function_id: string; worker_name: string }[] }).functions
    .filter((f) => f.worker_name === "HARNESS")
    .map((f) => f.function_id);

describe("HARNESS (deploy/harness.ts)", () => {
  it("starts with the engine: its workers' functions are listed with HARNESS as their worker", async () => {
    engine = await startEngine({ env: { HARNESS_DISABLE: "" } });
    expect(((await call(engine, "engine::edge::refresh")) as { hosts: string[] }).hosts).toEqual(["EDGE_DEMO", "EDGE_KEYED", "HARNESS"]);
    expect(await harnessFunctions(engine)).not.toEqual([]);
    expect(engine.output()).not.toMatch(/HarnessWorkers: not started/);
  });

  it("an unknown name in HARNESS_DISABLE: a clear error in the log, no harness functions, and the engine keeps serving", async () => {
    engine = await startEngine({ env: { HARNESS_DISABLE: "policy, nope" } });
    const e = engine;
    const line = await until(
      () =>
        e
          .output()
          .split("\n")
          .find((l) => l.includes("HarnessWorkers: not started")),
      "the startup error in the log",
      20_000,
    );
    expect(line).toContain(`HARNESS_DISABLE names no such worker: "nope" (the workers here: ${HARNESS_WORKERS.join(", ")})`);
    expect(await harnessFunctions(e)).toEqual([]);
    // Still up: the demo host and the engine's own functions answer.
    expect(await call(e, "edge::hello", { name: "ada" })).toEqual({ greeting: "Hello, ada! (from a Worker)" });
    expect((await fetch(`${e.url}/healthz`)).status).toBe(200);
  });
});
