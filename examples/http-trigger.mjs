// An HTTP route served by a worker's function: an `http` trigger binds GET /greet/:name to
// examples::greet, then the script calls the route like curl would and exits. The route lives as
// long as the worker is connected. With `npm start` running in another terminal:
//   node examples/http-trigger.mjs           # request once, print, exit
//   node examples/http-trigger.mjs --serve   # keep serving; curl it, Ctrl-C to stop
import { registerWorker } from "iii-sdk";

const url = process.env.III_URL ?? "ws://127.0.0.1:8787";
const httpBase = url.replace(/^ws/, "http"); // routes are served on the engine's own host and port
// OTel off: otherwise the SDK's telemetry socket and timers keep the process alive after shutdown().
const iii = registerWorker(url, { workerName: "greeter", otel: { enabled: false }, enableMetricsReporting: false });

// The function gets the request ({path_params, query_params, headers, method, body, …}) and
// answers {status_code?, headers?, body?}.
iii.registerFunction("examples::greet", async (req) => ({
  status_code: 200,
  body: { message: `${req.query_params.greeting ?? "hello"}, ${req.path_params.name}!` },
}));
iii.registerTrigger({ type: "http", function_id: "examples::greet", config: { api_path: "greet/:name", http_method: "GET" } });

const route = `${httpBase}/greet/ada?greeting=hi`;
// The trigger is registered fire-and-forget: until the engine has it, the path is a 404.
let res;
for (const end = Date.now() + 5_000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
  res = await fetch(route);
  if (res.status !== 404) break;
}
console.log(`GET /greet/ada?greeting=hi -> ${res.status} ${await res.text()}`);

if (process.argv.includes("--serve")) {
  console.log(`serving: curl -s '${httpBase}/greet/grace?greeting=hey'   (Ctrl-C to stop)`);
  process.on("SIGINT", () => iii.shutdown().then(() => process.exit(0)));
} else {
  await iii.shutdown();
}
