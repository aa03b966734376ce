// The transport-agnostic client core, shared by the Node client and sdk-browser.
export * from "./types.ts";
export {
  Client,
  randomId,
  jsonSchemaOf,
  parseInput,
  withoutCallerId,
  MAX_BUFFERED_FRAMES,
  MAX_BUFFERED_BYTES,
  LOCAL_TIMEOUT_GRACE_MS,
  SDK_VERSION,
  type ClientOptions,
  type CoreOptions,
  type Connector,
  type Link,
  type LinkEvents,
  type Logger,
  type Outbox,
  type OutboxEntry,
} from "./core.ts";
export { syncAmbientTrace, type AmbientTrace, type TraceFields } from "./trace.ts";
export { IIIError, toErrorBody } from "@iii-edge/protocol";
