// What every harness bench starts: a zero-latency provider replay, exactly `npm start` pointed at
// it (with a permissions file when the bench calls functions), and a caller.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import { startEngine, type EngineServer } from "../support/engine-server.ts";
import { startProviderReplay, type ReplayServer } from "../support/provider-replay.ts";

/** The harness registers within this on a busy 2-core box. */
const REGISTER_TIMEOUT_MS = 30_000;

export interface HarnessBench {
  replay: ReplayServer;
  engine: EngineServer;
  iii: IIIClient;
}

export async function startHarnessBench(name: string, opts: { rules?: string; env?: Record<string, string> } = {}): Promise<HarnessBench> {
  const replay = await startProviderReplay();
  const env: Record<string, string> = { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-bench", ...opts.env };
  if (opts.rules !== undefined) {
    const file = path.join(mkdtempSync(path.join(tmpdir(), `${name}-`)), "iii-permissions.yaml");
    writeFileSync(file, opts.rules);
    env.III_PERMISSIONS_PATH = file;
  }
  const engine = await startEngine({ env });
  const iii = registerWorker(engine.wsUrl, { workerName: `${name}-caller`, otel: { enabled: false } });
  return { replay, engine, iii };
}

/** Wait until every id in `ids` is registered. */
export async function registered(iii: IIIClient, ids: readonly string[], timeoutMs = REGISTER_TIMEOUT_MS): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
    const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
    if (ids.every((id) => r.functions.some((f) => f.function_id === id))) return;
  }
  throw new Error(`not registered within ${timeoutMs} ms: ${ids.join(", ")}`);
}
