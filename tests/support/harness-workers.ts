/**
 * The built-in harness workers deploy/harness.ts composes, in its order (the order the engine's
 * log names them in), each also `npm run worker -- <name>`.
 */
export const HARNESS_WORKERS = [
  "harness",
  "turn-orchestrator",
  "provisioning",
  "providers",
  "auth-credentials",
  "policy",
  "approval-gate",
  "session-storage",
  "budget-tracker",
  "hook-fanout",
  "context-compaction",
  "sub-agents",
  "cassettes",
] as const;
