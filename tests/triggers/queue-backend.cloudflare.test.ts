// The queue backend conformance suite (queue-backend.case.ts) on Cloudflare Queues, through the
// local Queues simulator and the Worker's queue() handler: queue 'conformance_cloudflare'. Every
// hop waits for the consumer's batch window (max_batch_timeout = 1 s), so the cases are kept to a
// few messages each.
import { queueBackendConformance } from "./queue-backend.case.ts";

queueBackendConformance("cloudflare", () => ({
  backend: "cloudflare",
  queue: "conformance_cloudflare",
  // config.ts refuses type "fifo" with backend "cloudflare".
  fifo: { unsupported: "Cloudflare Queues deliver batches in no guaranteed order and retry messages out of it" },
  hop: 5_000,
  // One batch window and a bit: a repeat would arrive in the next batch.
  quiet: 1_500,
}));
