import { it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync, createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort, repoRoot } from "../../../tests/support/engine-server.ts";
import * as H from "./support/harness.ts";
import { HARNESS_DISABLE, queuesWithTurnStep, callAnswer, textAnswer } from "./support/stand-ins.ts";
import { until } from "../../../tests/support/wait.ts";

it("crash debug", { timeout: 300_000 }, async () => {
  const port = await freePort();
  const stateDir = mkdtempSync(path.join(tmpdir(), "dbg-state-"));
  const log = createWriteStream("/tmp/dbg/engine.log");
  let child: ReturnType<typeof spawn>;
  const launch = async () => {
    const env = { ...process.env, PORT: String(port), III_STATE_DIR: stateDir, III_INSPECTOR_PORT: String(await freePort()), III_LOG_LEVEL: "log",
      PATH: `${path.join(repoRoot, "node_modules", ".bin")}:${process.env.PATH}`, HARNESS_DISABLE, III_DEV_VARS: JSON.stringify(queuesWithTurnStep()) };
    child = spawn(process.execPath, [path.join(repoRoot, "scripts/start.mjs")], { cwd: repoRoot, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.pipe(log, { end: false }); child.stderr!.pipe(log, { end: false });
    await until(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, "healthy", 90_000);
  };
  const stop = async () => { const c = child; const ex = new Promise((r) => c.once("exit", r)); process.kill(-c.pid!, "SIGTERM"); await ex;
    for (let i = 0; i < 100; i++) { try { await fetch(`http://127.0.0.1:${port}/healthz`); await new Promise((r) => setTimeout(r, 100)); } catch { break; } } };
  await launch();
  // monkeypatch startEngine-less harness: reuse startHarness pieces by faking engine
  const fake = { url: `http://127.0.0.1:${port}`, wsUrl: `ws://127.0.0.1:${port}`, port, stateDir, stop, restart: async () => { log.write("\n===== RESTART =====\n"); await stop(); await launch(); } };
  const h = await (H as unknown as { startHarnessOn: (e: unknown, o: unknown) => Promise<H.Harness> }).startHarnessOn(fake, { reconnect: true });
  h.orchestrator.client.addConnectionStateListener((s) => console.log("orch state", s, Date.now()));
  const sid = "crash"; const model = "gpt-crash";
  h.rules.set("test::block", "allow");
  h.scripts.set(model, (_req, n) => (n === 0 ? callAnswer(model, [{ id: "k1", fn: "test::block", payload: {} }]) : textAnswer(model, "recovered")));
  await H.start(h, sid, model);
  await until(() => h.targets.calls.filter((c) => c.fn === "test::block").length === 1, "executing", 20_000);
  await fake.restart();
  h.targets.gate.release();
  console.log("restarted", Date.now());
  try {
    await H.waitState(h, sid, "stopped", 40_000);
    console.log("STOPPED OK", JSON.stringify(H.transcript(h, sid).map((e) => e.entry_id)));
  } catch (e) { console.log("FAILED", String(e));
    const w = await h.client.client.trigger({ function_id: "engine::workers::list", payload: {} }).catch((e2) => String(e2));
    console.log("WORKERS", JSON.stringify(w).slice(0, 3000));
    const f = await H.listed(h.client).catch((e2) => [String(e2)]);
    console.log("FUNCS", f.join(","));
    console.log("RECORD", JSON.stringify(await H.call(h, "state::get", { scope: "turn_state", key: sid }).catch(String)));
    console.log("Q", JSON.stringify(await H.call(h, "engine::queue::topic_stats", { topic: "turn-step" }).catch(String)));
    console.log("DLQ", JSON.stringify(await H.call(h, "engine::queue::dlq_messages", { queue: "turn-step" }).catch(String)).slice(0, 3000));
    console.log("TRANSCRIPT", JSON.stringify(H.transcript(h, sid).map((e) => e.entry_id)));
    console.log("ORCHSTATE", h.orchestrator.client.getConnectionState(), h.orchestrator.client.workerId);
  }
  await H.stopHarness(h);
});
