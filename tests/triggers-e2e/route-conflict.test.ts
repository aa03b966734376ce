// Two http routes of the same shape whose parameters are named differently (`:listId/:userId`, then
// `:userId/:listId`, same method) would both match every request, and the names would decide which
// function got it. The engine keeps the first and refuses the second with a registration error, as
// iii does (its SDK suite's test_conflicting_route_structure_is_rejected): here with iii-sdk 0.22.1,
// which reports a refused registration on the console, and with raw frames, which see the typed
// `triggerregistrationresult`.
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

/** The words iii's clients look for in the refusal. */
const CONFLICT = "conflicts with already-registered route";

let engine: EngineServer;
const sockets: RawSocket[] = [];

type Listed = { id: string; function_id: string; config: { api_path: string } };
async function routesOf(s: RawSocket, fn: string): Promise<Listed[]> {
  return (await s.ok<{ registered_triggers: Listed[] }>("engine::registered-triggers::list", { function_id: fn })).registered_triggers;
}

beforeAll(async () => {
  engine = await startEngine();
});
afterEach(() => vi.restoreAllMocks());
afterAll(async () => {
  for (const s of sockets) await s.close().catch(() => {});
  await engine?.stop();
});

describe("routes of the same shape with other parameter names", () => {
  it("iii-sdk: the second is refused with the conflict logged; the first keeps serving", async () => {
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    const iii: IIIClient = registerWorker(engine.wsUrl, { workerName: "route-conflict", otel: { enabled: false } });
    try {
      iii.registerFunction("conflict::a", async (req: { path_params: Record<string, string> }) => ({
        status_code: 200,
        body: { by: "a", params: req.path_params },
      }));
      iii.registerFunction("conflict::b", async (req: { path_params: Record<string, string> }) => ({
        status_code: 200,
        body: { by: "b", params: req.path_params },
      }));
      iii.registerTrigger({
        type: "http",
        function_id: "conflict::a",
        config: { api_path: "conflict/sdk/:listId/:userId", http_method: "GET" },
      });
      await eventually(async () => (await fetch(`${engine.url}/conflict/sdk/list1/user1`)).status === 200, 15_000, "the first route");
      iii.registerTrigger({
        type: "http",
        function_id: "conflict::b",
        config: { api_path: "conflict/sdk/:userId/:listId", http_method: "GET" },
      });
      await eventually(() => logged.some((m) => m.includes(CONFLICT)), 10_000, "the conflict reported to the SDK");

      const res = await fetch(`${engine.url}/conflict/sdk/list1/user1`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ by: "a", params: { listId: "list1", userId: "user1" } });
      const observer = await RawSocket.open(`${engine.wsUrl}/`);
      sockets.push(observer);
      expect(await routesOf(observer, "conflict::b")).toEqual([]);
      expect((await routesOf(observer, "conflict::a")).map((t) => t.config.api_path)).toEqual(["conflict/sdk/:listId/:userId"]);
    } finally {
      await iii.shutdown();
    }
  });

  it("raw frames: trigger_registration_failed for the swapped names; other shapes and the same route are not conflicts", async () => {
    const w = await RawSocket.open(`${engine.wsUrl}/`);
    sockets.push(w);
    w.serve("conflict::raw-a", (d) => ({ status_code: 200, body: { by: "a", params: d.path_params } }));
    w.serve("conflict::raw-b", (d) => ({ status_code: 200, body: { by: "b", params: d.path_params } }));
    w.send({
      type: "registertrigger",
      id: "raw-first",
      trigger_type: "http",
      function_id: "conflict::raw-a",
      config: { api_path: "conflict/raw/:listId/:userId", http_method: "GET" },
    });
    await eventually(async () => (await fetch(`${engine.url}/conflict/raw/l/u`)).status === 200, 15_000, "the first route");

    for (const [id, api_path] of [
      ["raw-swapped", "conflict/raw/:userId/:listId"],
      ["raw-renamed", "/conflict/raw/:listId/:other/"],
    ] as const) {
      w.send({
        type: "registertrigger",
        id,
        trigger_type: "http",
        function_id: "conflict::raw-b",
        config: { api_path, http_method: "GET" },
      });
      const r = await w.next((f) => f.type === "triggerregistrationresult" && f.id === id);
      expect(r.error.code, api_path).toBe("trigger_registration_failed");
      expect(r.error.message, api_path).toContain(CONFLICT);
      expect(r.error.message).toContain("/conflict/raw/:listId/:userId");
    }
    // Not conflicts: another method, a literal where the first has a parameter (static beats
    // parameter, so each request has one answer), and the first route again under another id.
    w.send({
      type: "registertrigger",
      id: "raw-post",
      trigger_type: "http",
      function_id: "conflict::raw-b",
      config: { api_path: "conflict/raw/:userId/:listId", http_method: "POST" },
    });
    w.send({
      type: "registertrigger",
      id: "raw-literal",
      trigger_type: "http",
      function_id: "conflict::raw-b",
      config: { api_path: "conflict/raw/fixed/:userId", http_method: "GET" },
    });
    await eventually(async () => (await fetch(`${engine.url}/conflict/raw/fixed/u`)).status === 200, 10_000, "the literal route");
    expect(await (await fetch(`${engine.url}/conflict/raw/fixed/u`)).json()).toEqual({ by: "b", params: { userId: "u" } });
    expect(await (await fetch(`${engine.url}/conflict/raw/x/y`, { method: "POST" })).json()).toEqual({
      by: "b",
      params: { userId: "x", listId: "y" },
    });
    expect(await (await fetch(`${engine.url}/conflict/raw/l/u`)).json()).toEqual({ by: "a", params: { listId: "l", userId: "u" } });
    expect((await routesOf(w, "conflict::raw-b")).map((t) => t.id).sort()).toEqual(["raw-literal", "raw-post"]);
    expect(w.received.filter((f) => f.type === "triggerregistrationresult" && f.error).map((f) => f.id)).toEqual([
      "raw-swapped",
      "raw-renamed",
    ]);
  });
});
