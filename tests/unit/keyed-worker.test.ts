// Keyed workers outside Cloudflare (docs/keyed-workers.md) on the engine core served in this
// process (@iii-edge/test-support/node-engine): the conformance suite (tests/keyed/keyed.case.ts)
// against the demo keyed counter run as a Node worker (`runWorkers`: a node:sqlite file per key),
// driven by an unmodified iii-sdk caller. The Worker-hosted counter of `npm start` and
// `npm run worker -- counter` are in tests/node/keyed-worker.test.ts.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { keyedCounter } from "@iii-edge/demo-app/counter";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { type IIIClient, registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { keyedConformance, sdkOutcome } from "../keyed/keyed.case.ts";

// A restart of the worker (the conformance suite's eviction) waits for the engine to route to the
// new connection: more than the unit project's 5 s default on a loaded machine.
vi.setConfig({ testTimeout: 30_000 });

let engine: NodeEngine;
let caller: IIIClient;
let running: RunningWorkers | undefined;
const prefix = `ncounter${crypto.randomUUID().slice(0, 8)}`;
const dir = mkdtempSync(path.join(tmpdir(), "iii-keyed-"));
const uid = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

const call = (function_id: string, payload: unknown) => sdkOutcome(caller, function_id, payload);

/** Start the keyed worker and wait until the engine routes to it. */
async function startWorker(): Promise<void> {
  running = runWorkers(`${engine.wsUrl}/`, [keyedCounter(prefix)], { workerName: prefix, keyedDir: dir, env: {} });
  await until(async () => (await call(`${prefix}::get`, { user_id: "probe" })).error === undefined, "the keyed worker's functions", 30_000);
}

beforeAll(async () => {
  engine = await startNodeEngine();
  caller = registerWorker(`${engine.wsUrl}/`, { workerName: "keyed-caller", otel: { enabled: false }, enableMetricsReporting: false });
  await startWorker();
});
afterAll(async () => {
  await running?.shutdown();
  await caller?.shutdown();
  await engine?.stop();
  rmSync(dir, { recursive: true, force: true });
});

keyedConformance("Node-hosted (node:sqlite per key, runWorkers)", () => ({
  prefix,
  call,
  // A restart of the worker: its instances, timers and connection gone; its data directory kept.
  evict: async () => {
    await running?.shutdown();
    // shutdown() resolves when this side has closed; the engine drops the old connection's ids a
    // moment later. A new connection registering them before that is refused (they are held), so
    // the restart waits for them to go, as a supervisor restarting a process would.
    await until(
      async () => (await call(`${prefix}::get`, { user_id: "probe" })).error?.code === "function_not_found",
      "the old worker gone",
    );
    await startWorker();
  },
  wakeAlarms: async (key) => {
    await Promise.all([0, 1].map(() => running?.keyed?.fire(prefix, key)));
  },
}));

describe("a Node-hosted keyed worker seen from iii-sdk", () => {
  it("lists a Node-hosted keyed function with the field it is keyed by", async () => {
    const list = (await caller.trigger({ function_id: "engine::functions::info", payload: { function_id: `${prefix}::add` } })) as {
      metadata?: Record<string, unknown>;
    };
    expect(list.metadata).toMatchObject({ keyed_by: "user_id" });
  });

  it("keeps one database file per key in the data directory", async () => {
    const before = readdirSync(dir).filter((f) => f.endsWith(".sqlite")).length;
    await call(`${prefix}::add`, { user_id: uid("file") });
    const after = readdirSync(dir).filter((f) => f.endsWith(".sqlite")).length;
    expect(after).toBe(before + 1);
  });
});
