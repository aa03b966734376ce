// The engine's key/value store through state::* built-ins, called with trigger() like any
// function. Values are JSON, kept per scope and key in the engine's SQLite. With `npm start`
// running in another terminal:
//   node examples/state.mjs
import { registerWorker } from "iii-sdk";

const url = process.env.III_URL ?? "ws://127.0.0.1:8787";
// OTel off: otherwise the SDK's telemetry socket and timers keep the process alive after shutdown().
const iii = registerWorker(url, { workerName: "state-example", otel: { enabled: false }, enableMetricsReporting: false });
const key = { scope: "examples", key: "greeting" };

show("set   ", await iii.trigger({ function_id: "state::set", payload: { ...key, value: { text: "hello", n: 1 } } }));
show("get   ", await iii.trigger({ function_id: "state::get", payload: key }));
show("update", await iii.trigger({ function_id: "state::update", payload: { ...key, ops: [{ type: "increment", path: "n", by: 1 }] } }));
// state::delete answers the previous value itself; a missing key reads as undefined.
show("delete", await iii.trigger({ function_id: "state::delete", payload: key }));
show("get   ", await iii.trigger({ function_id: "state::get", payload: key }));

await iii.shutdown();

function show(label, value) {
  console.log(label, value === undefined ? "undefined" : JSON.stringify(value));
}
