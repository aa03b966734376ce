import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";
import { engineInWorkerd } from "@iii-edge/test-support/workerd-project";

// Trigger types and durable delivery inside workerd (docs/engineering.md Toolchain §5): the real
// Engine object, D1, Cloudflare Queues and alarms. Queues are configured with short backoffs so
// retries and dead letters take milliseconds (durable) or about a second a hop (Cloudflare Queues).
export const TEST_QUEUES = {
  default: { backend: "cloudflare", max_retries: 2, backoff_ms: 0 },
  jobs: { backend: "durable", max_retries: 2, backoff_ms: 5, concurrency: 4 },
  turns: { backend: "durable", type: "fifo", message_group_field: "session_id", max_retries: 2, backoff_ms: 5, concurrency: 8 },
  // The queue backend conformance suite (queue-backend.case.ts): backoffs long enough to measure,
  // Cloudflare's in whole seconds (its retry delays are), and a concurrency a batch of 10 exceeds.
  conformance_durable: { backend: "durable", max_retries: 2, backoff_ms: 50, concurrency: 3 },
  conformance_cloudflare: { backend: "cloudflare", max_retries: 2, backoff_ms: 1000, concurrency: 2 },
  // long-delivery.test.ts: a fifo whose deliveries may run longer than a call's default deadline
  // (INVOKE_TIMEOUT_MS below), like `turn-step` in wrangler.toml, and one whose deadline is shorter
  // than its handler.
  long_fifo: {
    backend: "durable",
    type: "fifo",
    message_group_field: "session_id",
    timeout_ms: 5_000,
    max_retries: 2,
    backoff_ms: 5,
    concurrency: 8,
  },
  short_fifo: {
    backend: "durable",
    type: "fifo",
    message_group_field: "session_id",
    timeout_ms: 300,
    max_retries: 2,
    backoff_ms: 5,
    concurrency: 8,
  },
};

/** The deadline of a call that names none, shortened from 30 s so long-delivery.test.ts can show
 * which deadline a queue delivery runs under without 30 s handlers. Every other call the suites
 * make answers within milliseconds or names its own deadline. */
export const TEST_INVOKE_TIMEOUT_MS = 1_500;

export default defineProject(async () => ({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  plugins: [await engineInWorkerd({ QUEUES: JSON.stringify(TEST_QUEUES), INVOKE_TIMEOUT_MS: String(TEST_INVOKE_TIMEOUT_MS) })],
  // One workerd per test process, reused file after file; the setup file resets its objects first.
  test: {
    name: "triggers",
    include: ["**/*.test.ts"],
    setupFiles: ["../workers/apply-migrations.ts"],
    isolate: false,
    testTimeout: 30_000,
  },
}));
