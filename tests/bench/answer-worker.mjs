#!/usr/bin/env node
// The benchmark's answering worker, in its own process: registers `bench::echo` and answers every
// call with its payload. `sdk` mode is the unmodified iii-sdk@0.22.1; `raw` mode speaks the wire
// protocol directly over `ws` (to separate the SDK's own cost from the engine's).
// `relay` mode is the responder of the relay baseline: it sends back every message it gets.
// `authfn` mode registers `bench::auth`, the engine's AUTH_FUNCTION in the connect measurement: it
// admits an upgrade that carries `x-api-key: bench-key` with the grant {sub, ns:["*"]}.
// A token in $BENCH_TOKEN (engine with AUTH_SECRET) is sent as `Authorization: Bearer <token>`.
// usage: node answer-worker.mjs <ws url> [sdk|raw|relay|authfn]
import WebSocket from "ws";
import { registerWorker } from "iii-sdk";

const [url, mode = "sdk"] = process.argv.slice(2);
if (!url) {
  console.error("usage: answer-worker.mjs <ws url> [sdk|raw|relay|authfn]");
  process.exit(2);
}
const headers = process.env.BENCH_TOKEN ? { Authorization: `Bearer ${process.env.BENCH_TOKEN}` } : {};

if (mode === "sdk") {
  const iii = registerWorker(url, { workerName: "bench-answer", otel: { enabled: false }, headers });
  iii.registerFunction("bench::echo", async (data) => data);
} else if (mode === "authfn") {
  const iii = registerWorker(url, { workerName: "bench-auth", otel: { enabled: false }, headers });
  iii.registerFunction("bench::auth", async (input) =>
    input?.headers?.["x-api-key"] === "bench-key" ? { sub: "bench-fn-user", ns: ["*"] } : { allowed: false, reason: "bad api key" },
  );
} else if (mode === "relay") {
  const ws = new WebSocket(`${url}/_bench/relay-responder`, { perMessageDeflate: false });
  ws.on("message", (raw) => ws.send(raw.toString()));
  ws.on("open", () => console.log("relay responder ready"));
  ws.on("close", () => process.exit(0));
} else {
  const ws = new WebSocket(url, { perMessageDeflate: false, headers });
  ws.on("open", () => ws.send(JSON.stringify({ type: "registerfunction", id: "bench::echo" })));
  ws.on("message", (raw) => {
    const f = JSON.parse(raw.toString());
    if (f.type !== "invokefunction" || !f.invocation_id) return;
    ws.send(JSON.stringify({ type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id, result: f.data }));
  });
  ws.on("close", () => process.exit(0));
}
process.on("SIGTERM", () => process.exit(0));
