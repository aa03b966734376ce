// The session-storage worker (docs/harness-contracts.md §1.11, §5): `session-tree::*`, the conversation of
// each session as a branching tree of entries, and `session-inbox::*`, per-session named queues.
// Inside the Worker it keeps them in D1 (`env.DB`); alone in Node (./node.ts) in a node:sqlite
// file.
import { z } from "zod";
import { IIIError, requestFormat, responseFormat, seesAllSessions, type CallerPrincipal } from "@iii-edge/protocol";
import { type AgentMessage, type SessionStorageFunctionId, sessionStorageContracts } from "@iii-edge/protocol/harness";
import type { WorkerHandler, WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { registerCompactionFunctions } from "./compaction-store.ts";
import { ownerChecked } from "./owners.ts";
import { d1Store, isD1, type SqlStore } from "./sql-store.ts";
import { SessionStore, type SessionStoreOptions } from "./session-store.ts";
import { registerSessionTree } from "./tree-functions.ts";

export { SessionStore } from "./session-store.ts";
export { SessionTreeStore } from "./tree.ts";
export * from "./sql-store.ts";

export {
  MAX_CWD_LENGTH,
  MAX_DISPLAY_NAME_LENGTH,
  MAX_ENTRY_ID_LENGTH,
  MAX_INBOX_NAME_LENGTH,
  MAX_SESSION_ID_LENGTH,
} from "@iii-edge/protocol/harness";

// Requests and responses: protocol's sessionStorageContracts (docs/harness-contracts.md §5).
type FunctionId = SessionStorageFunctionId;
type Request<Id extends FunctionId> = z.output<(typeof sessionStorageContracts)[Id]["request"]>;

const descriptions: Record<FunctionId, string> = {
  "session-tree::ensure": "Create a session if it does not exist yet: {session_id, created}.",
  "session-tree::get": "A session's metadata (created/updated times, entry and branch counts, active leaf), or null.",
  "session-tree::list": "Sessions, most recently updated first (order: asc for oldest first), with their total.",
  "session-tree::append":
    "Append a message under parent_id (default: the active leaf); it becomes the leaf. An entry_id that exists appends nothing (appended: false).",
  "session-tree::append_many":
    "Append messages chained to each other in one step; the last becomes the leaf. appended counts the new entries.",
  "session-tree::messages": "The messages on the active path (or the path to branch_leaf), oldest first, a page at a time (next_cursor).",
  "session-tree::update_message": "Replace an entry's message in place; its revision goes up.",
  "session-inbox::push": "Queue an item on a session's named inbox (steering, followup): {ok, size}; ok false when full.",
  "session-inbox::peek": "The items queued on a session's named inbox, oldest first, without removing them.",
  "session-inbox::drain": "Take every item of a session's named inbox at once, oldest first (atomic: an item is taken once).",
};

export interface SessionStorageConfig extends SessionStoreOptions {
  store: SqlStore;
}

/** In the Worker: the D1 binding `DB`. */
export function configFrom(env: Readonly<Record<string, unknown>>): SessionStorageConfig {
  if (!isD1(env.DB)) throw new Error("session-storage needs the D1 binding DB (or run it in Node: workers/session-storage/src/node.ts)");
  return { store: d1Store(env.DB) };
}

function parse<Id extends FunctionId>(id: Id, data: unknown): Request<Id> {
  const r = sessionStorageContracts[id].request.safeParse(data);
  if (!r.success) throw new IIIError("invalid_arguments", `${id}: ${z.prettifyError(r.error)}`);
  return r.data as Request<Id>;
}

export function registerSessionStorage(surface: WorkerSurface, config: SessionStorageConfig): SessionStore {
  const store = new SessionStore(config.store, config);
  // Every function checks the caller against the session's owner first (owners.ts).
  const iii = ownerChecked(surface, { setOwner: (sid, owner) => store.setOwner(sid, owner) });
  const fn = <Id extends FunctionId>(
    id: Id,
    handler: (req: Request<Id>, caller: CallerPrincipal | undefined) => Promise<unknown>,
  ): void => {
    const h: WorkerHandler = (data: unknown, ctx) => handler(parse(id, data), ctx.caller);
    iii.registerFunction(id, h, {
      description: descriptions[id],
      request_format: requestFormat(sessionStorageContracts[id].request),
      response_format: responseFormat(sessionStorageContracts[id].response),
    });
  };
  const msg = (m: unknown): AgentMessage => m as AgentMessage; // checked by agentMessageSchema (lenient by design)

  fn("session-tree::ensure", async (r, caller) => {
    const out = await store.ensure(r.session_id, { display_name: r.display_name, cwd: r.cwd });
    const owner = r.owner ?? caller?.sub;
    if (owner !== undefined) await store.setOwner(r.session_id, owner);
    return out;
  });
  fn("session-tree::get", (r) => store.get(r.session_id));
  // Only the caller's own sessions, unless its grant sees every session (or trusted code asks).
  fn("session-tree::list", (r, caller) => store.list(caller && !seesAllSessions(caller) ? { ...r, owner: caller.sub } : r));
  fn("session-tree::append", (r) => store.append(r.session_id, { entry_id: r.entry_id, message: msg(r.message) }, r.parent_id));
  fn("session-tree::append_many", async (r) => {
    const { entry_ids, appended } = await store.appendMany(
      r.session_id,
      r.entries.map((e) => ({ entry_id: e.entry_id, message: msg(e.message) })),
      r.parent_id,
    );
    return { entry_ids, appended };
  });
  fn("session-tree::messages", (r) => store.messages(r.session_id, r));
  fn("session-tree::update_message", (r) => store.updateMessage(r.session_id, r.entry_id, msg(r.message)));
  fn("session-inbox::push", (r) => store.push(r.session_id, r.name, r.item));
  fn("session-inbox::peek", (r) => store.peek(r.session_id, r.name));
  fn("session-inbox::drain", (r) => store.drain(r.session_id, r.name));
  // session-tree::compact | compactions | update_parts (compaction entries, pruned outputs).
  registerCompactionFunctions(iii, config.store, config);
  // session-tree::fork | clone | tree | branches | set_active_leaf | get_entry | export (src/tree.ts).
  registerSessionTree(iii, config);
  return store;
}

export const worker: WorkerModule<SessionStorageConfig> = {
  name: "session-storage",
  kernel: true,
  configFrom,
  register: (iii, config) => void registerSessionStorage(iii, config),
};
export default worker;
