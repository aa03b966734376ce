// Queued work: trigger() with the Enqueue action answers at once with a receipt, and the engine
// delivers the payload to the function later (with retries and backoff per the queue's settings).
// "jobs" is a queue of wrangler.toml's QUEUES (durable backend: in the engine object, milliseconds).
// With `npm start` running in another terminal:
//   node examples/queue.mjs
import { registerWorker, TriggerAction } from "iii-sdk";

const url = process.env.III_URL ?? "ws://127.0.0.1:8787";
// OTel off: otherwise the SDK's telemetry socket and timers keep the process alive after shutdown().
const iii = registerWorker(url, { workerName: "queue-example", otel: { enabled: false }, enableMetricsReporting: false });

let handled;
const done = new Promise((resolve) => (handled = resolve));
iii.registerFunction("examples::resize", async (job) => {
  console.log("handled", job);
  handled();
  return { ok: true };
});

const receipt = await iii.trigger({
  function_id: "examples::resize",
  payload: { image: "cat.png", width: 640 },
  action: TriggerAction.Enqueue({ queue: "jobs" }),
});
console.log("enqueued", receipt);

await done;
// The handler has run, but its result is still on its way to the engine: closing now would leave
// the message unacknowledged, and the engine would redeliver it to a worker that has gone (and
// dead-letter it). Wait until the queue holds nothing in flight (iii::queue::status), then leave.
for (let i = 0; i < 100; i++) {
  const status = await iii.trigger({ function_id: "iii::queue::status", payload: { queue: "jobs" } });
  if (status.inflight === 0 && status.pending === 0) break;
  await new Promise((r) => setTimeout(r, 50));
}
await iii.shutdown();
