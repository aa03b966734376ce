// Two workers through the engine: "math" registers math::add, "caller" calls it, then both
// disconnect and the process exits. With `npm start` running in another terminal:
//   node examples/connect.mjs
import { registerWorker } from "iii-sdk";

const url = process.env.III_URL ?? "ws://127.0.0.1:8787";
// iii-sdk turns on OpenTelemetry by default: a second socket to /otel (whose spans, logs and metrics
// the engine stores beside its own: `engine::traces::list`) plus timers that keep the process alive
// after shutdown(). Off here so the script exits;
// enableMetricsReporting: false stops the SDK warning that metrics need OTel.
const quiet = { otel: { enabled: false }, enableMetricsReporting: false };

const math = registerWorker(url, { workerName: "math", ...quiet });
math.registerFunction("math::add", async ({ a, b }) => ({ sum: a + b }));

const caller = registerWorker(url, { workerName: "caller", ...quiet });
// Registration is fire-and-forget and the two workers have separate sockets, so the call could
// overtake math's registration (function_not_found): wait until the engine lists math::add.
await until(async () => {
  const { functions } = await caller.trigger({ function_id: "engine::functions::list", payload: { prefix: "math::" } });
  return functions.some((f) => f.function_id === "math::add");
});

console.log(await caller.trigger({ function_id: "math::add", payload: { a: 2, b: 3 } }));

await Promise.all([caller.shutdown(), math.shutdown()]);

async function until(check, timeoutMs = 5_000) {
  for (const end = Date.now() + timeoutMs; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    if (await check()) return;
  }
  throw new Error("timed out waiting for math::add to be registered");
}
