// `npm run -s bench:session-heap` (not part of `npm run bench`): the live JavaScript heap of the
// engine's isolate (the Worker and its Durable Objects, one isolate locally) after a forced
// collection, read through wrangler's inspector (`HeapProfiler.collectGarbage`, then
// `Runtime.getHeapUsage`), between batches of agent sessions of one short turn each. Beside the
// idle-sessions bench's resident-set figure it tells live objects from heap the runtime keeps.
// Options (env): BATCHES (4), PER (200 sessions a batch).
import WebSocket from "ws";
import { reply, say } from "@iii-edge/test-support/provider-replay";
import { freePort } from "@iii-edge/test-support/engine-server";
import { followedTurn, registered, startHarnessBench } from "./harness-engine.ts";
const inspectorPort = await freePort();
const { replay, engine, iii } = await startHarnessBench("heap", { env: { III_INSPECTOR_PORT: String(inspectorPort) } });
await registered(iii, ["run::start", "provider::openai::stream"]);
const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json()) as {
  webSocketDebuggerUrl: string;
  title?: string;
}[];
// wrangler's inspector proxy refuses a debugger connection without an Origin it accepts.
const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl, { headers: { Origin: "http://127.0.0.1" } });
await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
let id = 0;
const pending = new Map<number, (v: unknown) => void>();
ws.on("message", (m) => {
  const msg = JSON.parse(String(m)) as { id?: number; result?: unknown };
  if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
});
const send = (method: string, params: unknown = {}) =>
  new Promise<unknown>((resolve, reject) => {
    const n = ++id;
    pending.set(n, resolve);
    ws.send(JSON.stringify({ id: n, method, params }));
    setTimeout(() => reject(new Error(`${method} timed out`)), 30_000);
  });
const heap = async () => {
  await send("HeapProfiler.collectGarbage");
  const u = (await send("Runtime.getHeapUsage")) as { usedSize: number; totalSize: number };
  return `used ${(u.usedSize / 1048576).toFixed(1)} MiB / total ${(u.totalSize / 1048576).toFixed(1)} MiB`;
};
let n = 0;
const session = () => followedTurn({ replay, engine }, `heap-${++n}`, [reply(say("Short answer."))]);
console.log(`iii-edge session heap: npm start, zero-latency replay; the isolate's live heap after a collection`);
console.log("  at start", await heap());
for (let batch = 1; batch <= Number(process.env.BATCHES ?? 4); batch++) {
  for (let i = 0; i < Number(process.env.PER ?? 200); i++) await session();
  console.log(`  after ${n} sessions`, await heap());
}
ws.close();
await iii.shutdown();
await engine.stop();
await replay.close();
process.exit(0);
