// The queue backend conformance suite (queue-backend.case.ts) on the durable FIFO inside the
// engine object (SQLite + alarm): queue 'conformance_durable' and the fifo queue 'turns'.
import { queueBackendConformance } from "./queue-backend.case.ts";

queueBackendConformance("durable", () => ({
  backend: "durable",
  queue: "conformance_durable",
  fifo: { queue: "turns", group_field: "session_id" },
  hop: 2_000,
  quiet: 200,
}));
