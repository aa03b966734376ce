// An agent that creates a worker: in one turn the replayed model finds no word-count function in the
// catalog, asks the sandbox host (`workers/sandbox-host/src/main.ts`, its own process, real TCG
// microVMs) to run one with `sandbox::spawn_worker`, and calls the function that worker registered
// in the next step. The policy is the built-in default (the repo's iii-permissions.yaml): it has no
// rule for sandbox::spawn_worker, so that call waits for a person, and so does the new function;
// the test approves both as an operator would. Skipped only where QEMU is missing.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FunctionResultMessage } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, openaiMessages, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

const onPath = (bin: string) =>
  (process.env.PATH ?? "").split(":").some((d) => {
    try {
      accessSync(path.join(d || ".", bin), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
const qemuMissing = onPath("qemu-system-x86_64")
  ? false
  : "qemu-system-x86_64 not installed (workers/sandbox-host/scripts/install-deps.sh)";
if (qemuMissing) console.warn(`[sandbox-worker turn] skipped: ${qemuMissing}`);

/** Booting the worker image under TCG (and building it on a fresh checkout) on a busy 2-core box. */
const HOST_READY_MS = 150_000;

const WORDCOUNT = `import { registerWorker } from "iii-sdk";
const iii = registerWorker(process.env.III_URL, { workerName: "wordcount", otel: { enabled: false }, enableMetricsReporting: false });
iii.registerFunction("wordcount::count", async ({ text }) => ({ words: String(text).trim().split(/\\s+/).filter(Boolean).length }), {
  description: "Count the words of a text.",
  request_format: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
});
`;

let replay: ReplayServer;
let engine: EngineServer;
let host: ChildProcess | undefined;
let hostLog = "";
let iii: IIIClient;
let ui: ReturnType<typeof turnClient>;

beforeAll(async () => {
  if (qemuMissing) return;
  replay = await startProviderReplay();
  engine = await startEngine({ env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-test" } });
  const stateDir = mkdtempSync(path.join(tmpdir(), "sbx-turn-"));
  host = spawn(
    process.execPath,
    [
      path.join(repoRoot, "workers/sandbox-host/src/main.ts"),
      "--engine",
      engine.wsUrl,
      "--state-dir",
      stateDir,
      "--pool",
      "0",
      "--worker-pool",
      "1",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  host.stderr?.on("data", (d: Buffer) => {
    hostLog += d.toString();
  });
  iii = registerWorker(engine.wsUrl, { workerName: "sandbox-turn-client", otel: { enabled: false }, enableMetricsReporting: false });
  ui = turnClient(engine, () => iii);
  // The warm worker VM is up (booted, iii-sdk loaded), so the spawn in the turn is the warm path.
  await until(
    async () =>
      ((await iii.trigger({ function_id: "sandbox::info", payload: {} })) as { worker_pool?: { pool_ready: number } }).worker_pool
        ?.pool_ready === 1,
    `the sandbox host's warm worker VM (host log: ${hostLog.slice(-500)})`,
    HOST_READY_MS,
    250,
  );
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
}, HOST_READY_MS + 60_000);

afterAll(async () => {
  await iii?.shutdown().catch(() => {});
  if (host && host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((r) => host!.once("exit", r));
    host.kill("SIGTERM");
    await exited;
  }
  await engine?.stop();
  await replay?.close();
});

describe.skipIf(qemuMissing)(
  `an agent creates a worker in a sandbox and uses it in the same turn${qemuMissing ? ` (skipped: ${qemuMissing})` : ""}`,
  () => {
    it("the catalog lacks the function → sandbox::spawn_worker (approved) → the new function (approved) → the answer", async () => {
      const sid = "sandbox-worker-turn";
      replay.enqueue(
        "openai",
        reply(callAgentTrigger("engine::functions::list", { prefix: "wordcount::" }, "look-1")),
        reply(
          callAgentTrigger("sandbox::spawn_worker", { source: WORDCOUNT, register_prefix: "wordcount::", idle_timeout_s: 120 }, "spawn-1"),
        ),
        reply(callAgentTrigger("wordcount::count", { text: "the quick brown fox jumps" }, "count-1")),
        reply(say("Your text has 5 words.")),
      );
      await ui.startTurn(sid, "How many words are in 'the quick brown fox jumps'? Make a tool for it if there is none.");

      // The policy applies to sandbox::spawn_worker itself: the turn parks until a person allows it.
      const parked = await ui.reached(sid, "function_awaiting_approval");
      expect(parked.awaiting_approval).toEqual([
        expect.objectContaining({ function_call_id: "spawn-1", function_id: "sandbox::spawn_worker" }),
      ]);
      const before = (await iii.trigger({ function_id: "engine::functions::list", payload: { prefix: "wordcount::" } })) as {
        functions: unknown[];
      };
      expect(before.functions).toEqual([]);
      expect((await ui.post("api/approvals", { session_id: sid, function_call_id: "spawn-1", decision: "allow" })).status).toBe(200);

      // The next step calls the function the sandbox registered; it is new, so it is asked about too.
      await until(
        async () => {
          const v = await ui.turnState(sid);
          return v?.state === "function_awaiting_approval" && v.awaiting_approval?.some((a) => a.function_call_id === "count-1");
        },
        "the call of the new function to park",
        TURN_DEADLINE_MS,
      );
      expect((await ui.post("api/approvals", { session_id: sid, function_call_id: "count-1", decision: "allow" })).status).toBe(200);
      const { view } = await ui.finished(sid);
      expect(view.turn_count).toBe(4);

      const results = (await ui.transcript(sid)).filter((m): m is FunctionResultMessage => m.role === "function_result");
      expect(results.map((r) => [r.function_call_id, r.is_error])).toEqual([
        ["look-1", false],
        ["spawn-1", false],
        ["count-1", false],
      ]);
      const requests = replay.requestsFor("openai");
      const toolText = (i: number, id: string) =>
        asText(openaiMessages(requests[i]).find((m) => m.role === "tool" && m.tool_call_id === id)?.content);
      expect(toolText(1, "look-1")).toContain('"functions":[]');
      expect(toolText(2, "spawn-1")).toContain("wordcount::count");
      expect(toolText(3, "count-1")).toContain('"words":5');

      // The sandbox is listed with the function it provides; stopping it takes the function away.
      const { sandboxes } = (await iii.trigger({ function_id: "sandbox::list", payload: {} })) as {
        sandboxes: { sandbox_id: string; kind: string; functions?: { function_id: string }[] }[];
      };
      const sbx = sandboxes.find((s) => s.kind === "worker");
      expect(sbx?.functions).toEqual([expect.objectContaining({ function_id: "wordcount::count" })]);
      await iii.trigger({ function_id: "sandbox::stop_worker", payload: { sandbox_id: sbx!.sandbox_id } });
      const after = (await iii.trigger({ function_id: "engine::functions::list", payload: { prefix: "wordcount::" } })) as {
        functions: unknown[];
      };
      expect(after.functions).toEqual([]);
    });
  },
);
