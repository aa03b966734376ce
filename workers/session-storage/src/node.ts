// The session-storage worker as a Node process (`npm run worker -- session-storage`): the same
// functions over a node:sqlite file at `SESSIONS_DB_PATH` (default
// .wrangler/state/harness-sessions.sqlite).
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { registerSessionStorage, type SessionStorageConfig } from "./index.ts";
import { openSqliteStore } from "./sqlite-store.ts";

export * from "./index.ts";
export { openSqliteStore, sqliteStore } from "./sqlite-store.ts";

export const DEFAULT_SESSIONS_DB_PATH = ".wrangler/state/harness-sessions.sqlite";

export function configFrom(env: Readonly<Record<string, unknown>>): SessionStorageConfig {
  const file = typeof env.SESSIONS_DB_PATH === "string" && env.SESSIONS_DB_PATH !== "" ? env.SESSIONS_DB_PATH : DEFAULT_SESSIONS_DB_PATH;
  return { store: openSqliteStore(file).store };
}

export const worker: WorkerModule<SessionStorageConfig> = {
  name: "session-storage",
  configFrom,
  register: (iii, config) => void registerSessionStorage(iii, config),
};
export default worker;
