// Worker-hosted functions (sdk-edge FunctionHost behind the EDGE_DEMO service binding) in the
// engine `npm start` runs: their manifest's functions and triggers are loaded at start, serve
// calls and HTTP routes with no socket held, and are there again after the engine restarts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { invokeHttp, worker, type Worker } from "./sdk.ts";

let engine: EngineServer;
let caller: Worker;

beforeAll(async () => {
  engine = await startSecureEngine();
  caller = await worker(engine.wsUrl, "edge-caller");
});
afterAll(async () => {
  await caller?.shutdown();
  await engine?.stop();
});

const hello = async (name: string) => {
  const r = await fetch(`${engine.url}/hello/${name}`);
  return { status: r.status, body: await r.json() };
};

describe("edge-hosted functions", () => {
  it("are listed with their host as worker, and answer calls from an iii-sdk worker", async () => {
    const { functions } = (await caller.trigger({ function_id: "engine::functions::list", payload: {} })) as {
      functions: { function_id: string; worker_name: string }[];
    };
    expect(functions.filter((f) => f.function_id.startsWith("edge::"))).toEqual(
      expect.arrayContaining([{ function_id: "edge::hello", worker_name: "EDGE_DEMO", description: expect.any(String) }]),
    );
    expect(await caller.trigger({ function_id: "edge::hello", payload: { name: "ada" } })).toEqual({
      greeting: "Hello, ada! (from a Worker)",
    });
    await expect(caller.trigger({ function_id: "edge::hello", payload: { name: "" } })).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("serve an http trigger declared in the host's manifest", async () => {
    expect(await hello("grace")).toEqual({ status: 200, body: { greeting: "Hello, grace! (from a Worker)" } });
    const { registered_triggers } = (await caller.trigger({
      function_id: "engine::registered-triggers::list",
      payload: { trigger_type: "http" },
    })) as {
      registered_triggers: { id: string; function_id: string; worker_name: string }[];
    };
    expect(registered_triggers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: "edge-hello-http", function_id: "edge::hello-http", worker_name: "EDGE_DEMO" }),
      ]),
    );
  });

  it("are there again after the engine restarts, and engine::edge::refresh reloads them", async () => {
    await engine.restart();
    expect(await hello("linus")).toEqual({ status: 200, body: { greeting: "Hello, linus! (from a Worker)" } });
    const refreshed = await invokeHttp(engine.url, { function_id: "engine::edge::refresh" });
    const functions = ((await refreshed.json()) as { result: { functions: string[] } }).result.functions;
    // The demo host's three, beside the built-in harness workers' (the HARNESS host).
    expect(functions.filter((id) => id.startsWith("edge::"))).toEqual(["edge::call-tab", "edge::hello", "edge::hello-http"]);
    expect(functions).toEqual(expect.arrayContaining(["run::start", "policy::check_permissions", "approval::resolve"]));
    expect((await hello("barbara")).status).toBe(200);
  });
});
