// The branching functions of `session-tree::*` (src/tree.ts): fork, clone, tree, branches,
// set_active_leaf, get_entry, export (and export_html, the name iii's own harness uses). Payloads
// are the contracts of `@iii-edge/protocol/harness` (protocol/src/harness/session-storage.ts); a payload that does
// not parse is `invalid_arguments`, as for the rest of this worker.
import { z } from "zod";
import { IIIError, requestFormat, responseFormat } from "@iii-edge/protocol";
import { type SessionTreeFunctionId as TreeFunctionId, sessionTreeContracts as treeContracts } from "@iii-edge/protocol/harness";
import type { WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { SqlStore } from "./sql-store.ts";
import { SessionTreeStore } from "./tree.ts";

type TreeRequest<Id extends TreeFunctionId> = z.output<(typeof treeContracts)[Id]["request"]>;

const descriptions: Record<TreeFunctionId, string> = {
  "session-tree::fork":
    "A new session whose path is a copy of the source's path up to from_entry_id (any entry): {session_id, leaf_id, created}. The same request (source, entry, request_key) always answers the same copy.",
  "session-tree::clone": "A new session with a copy of every entry of every branch of the source: {session_id, leaf_id, created}.",
  "session-tree::tree":
    "The session's entries as nested branches (each a run of entries; children start under its last entry), or the subtree under from_entry_id.",
  "session-tree::branches": "The tips of a session's tree, newest first: {leaf_id, fork_point_id, preview, active, …} each.",
  "session-tree::set_active_leaf":
    "Switch branch: make entry_id the active leaf (null: the next append is a new root). expected_leaf_id makes it a compare-and-set.",
  "session-tree::get_entry": "One entry {entry_id, parent_id, kind, depth, child_count, message | data}, or null.",
  "session-tree::export":
    "The active path (or the path to branch_leaf) rendered as json, markdown or a standalone html page: {format, content_type, content}.",
  "session-tree::export_html": "The active path (or the path to branch_leaf) as a standalone, escaped HTML page: {html}.",
};

function parse<Id extends TreeFunctionId>(id: Id, data: unknown): TreeRequest<Id> {
  const r = treeContracts[id].request.safeParse(data);
  if (!r.success) throw new IIIError("invalid_arguments", `${id}: ${z.prettifyError(r.error)}`);
  return r.data as TreeRequest<Id>;
}

export function registerSessionTree(iii: WorkerSurface, config: { store: SqlStore; now?: () => number }): SessionTreeStore {
  const tree = new SessionTreeStore(config.store, config);
  const fn = <Id extends TreeFunctionId>(id: Id, handler: (req: TreeRequest<Id>) => Promise<unknown>): void => {
    const h: WorkerHandler = (data: unknown) => handler(parse(id, data));
    iii.registerFunction(id, h, {
      description: descriptions[id],
      request_format: requestFormat(treeContracts[id].request),
      response_format: responseFormat(treeContracts[id].response),
    });
  };
  fn("session-tree::fork", (r) => tree.fork(r.source_session_id, r.from_entry_id, r));
  fn("session-tree::clone", (r) => tree.clone(r.source_session_id, r));
  fn("session-tree::tree", (r) => tree.tree(r.session_id, r.from_entry_id));
  fn("session-tree::branches", (r) => tree.branches(r.session_id));
  fn("session-tree::set_active_leaf", (r) => tree.setActiveLeaf(r.session_id, r.entry_id, r.expected_leaf_id));
  fn("session-tree::get_entry", (r) => tree.entry(r.session_id, r.entry_id));
  fn("session-tree::export", (r) => tree.export(r.session_id, r.format, r.branch_leaf));
  fn("session-tree::export_html", async (r) => ({ html: (await tree.export(r.session_id, "html", r.branch_leaf)).content }));
  return tree;
}
