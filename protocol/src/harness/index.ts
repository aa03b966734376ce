// The agent harness's contracts (docs/harness-contracts.md; a bare §N below is a section there): the messages
// and events every harness worker and UI reads, and the payloads of the functions workers call on
// each other. Workers share these through `@iii-edge/protocol/harness`, never through each other's
// files. Field names are snake_case, the names iii's own harness uses, so its UIs and workers read
// ours.
// One file per worker holds that worker's contracts; messages.ts and events.ts are shared by all.
export * from "./approval-gate.ts";
export * from "./auth-credentials.ts";
export * from "./budget-tracker.ts";
export * from "./cassettes.ts";
export * from "./context-compaction.ts";
export * from "./events.ts";
export * from "./failover.ts";
export * from "./harness.ts";
export * from "./harness-surface.ts";
export * from "./hook-fanout.ts";
export * from "./hooks.ts";
export * from "./messages.ts";
export * from "./policy.ts";
export * from "./providers.ts";
export * from "./provisioning.ts";
export * from "./sandbox.ts";
export * from "./session-storage.ts";
export * from "./state.ts";
export * from "./sub-agents.ts";
export * from "./turn-orchestrator.ts";
