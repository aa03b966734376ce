// The session storage worker's contracts (docs/harness-contracts.md §5): entries, the session tree
// (`session-tree::fork|clone|tree|branches|set_active_leaf|get_entry|export`) and the compaction
// entries it stores for the compaction worker (`session-tree::compact|compactions|update_parts`).
import { z } from "zod";
import type { AgentMessage } from "./messages.ts";

export type SessionEntry =
  | { type: "message"; id: string; parent_id: string | null; message: AgentMessage; timestamp: number }
  | {
      type: "custom_message";
      id: string;
      parent_id: string | null;
      custom_type: string;
      content: unknown;
      display?: string;
      details?: unknown;
      timestamp: number;
    }
  | { type: "branch_summary"; id: string; parent_id: string | null; summary: string; from_id: string; timestamp: number }
  | {
      type: "compaction";
      id: string;
      parent_id: string | null;
      summary: string;
      tokens_before: number;
      tail_start_id?: string | null;
      details: { read_files: string[]; modified_files: string[] };
      timestamp: number;
    };

export interface SessionMeta {
  session_id: string;
  display_name?: string;
  cwd?: string;
  created_at: number;
  updated_at: number;
  branch_count: number;
}

/** Session ids are state keys: no '/'. */
export const treeSessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
export const treeEntryId = z.string().min(1).max(256);
/** Longest request key of a fork / clone (it names the copy, so a repeat finds it). */
export const MAX_TREE_REQUEST_KEY_LENGTH = 256;
export const treeRequestKey = z.string().min(1).max(MAX_TREE_REQUEST_KEY_LENGTH);
export const treeDisplayName = z.string().max(200);

/** `session-tree::fork`: a new session whose path is the source's path up to `from_entry_id`.
 * Without `new_session_id` the id is derived from (source, entry, request_key): a repeat of the
 * same request answers the same copy (`created: false`). */
export const sessionForkRequest = z.object({
  source_session_id: treeSessionId,
  from_entry_id: treeEntryId,
  new_session_id: treeSessionId.optional(),
  request_key: treeRequestKey.optional(),
  display_name: treeDisplayName.optional(),
});
/** `session-tree::clone`: every entry of every branch, same rules for the new id. */
export const sessionCloneRequest = z.object({
  source_session_id: treeSessionId,
  new_session_id: treeSessionId.optional(),
  request_key: treeRequestKey.optional(),
  display_name: treeDisplayName.optional(),
});
export type SessionCopyKind = "fork" | "clone";
/** Where a forked or cloned session came from (`session-tree::get` answers it as `origin`). */
export interface SessionOrigin {
  kind: SessionCopyKind;
  source_session_id: string;
  /** The entry a fork was taken at (its copy is the fork's first leaf); null for a clone. */
  from_entry_id: string | null;
}
export interface SessionCopyResponse extends SessionOrigin {
  session_id: string;
  /** The copy's active leaf (the copy of `from_entry_id`, or of the source's leaf). */
  leaf_id: string | null;
  entry_count: number;
  /** false: this request had made the copy already; nothing was written. */
  created: boolean;
}

/** `session-tree::tree`: the whole tree, or the subtree under `from_entry_id`. */
export const sessionTreeRequest = z.object({ session_id: treeSessionId, from_entry_id: treeEntryId.optional() });
/** One entry of a tree or branch listing: what a UI needs to draw it, never the whole message. */
export interface TreeEntry {
  entry_id: string;
  kind: string;
  depth: number;
  timestamp: number;
  /** The message's role (message and custom_message entries). */
  role?: string;
  /** The first text of the entry, flattened and cut to one line. */
  preview?: string;
  /** An assistant entry's first function call (the target of an `agent_trigger`). */
  call?: string;
  /** A function_result entry's function. */
  function_id?: string;
  child_count: number;
  /** On the path from a root to the active leaf. */
  active?: true;
}
/** A branch: a run of entries, each the only child of the one before; `children` are the branches
 * that start under its last entry. `truncated`: nested too deep for one answer — ask again with
 * `from_entry_id` = its last entry. */
export interface TreeBranch {
  entries: TreeEntry[];
  children: TreeBranch[];
  truncated?: true;
}
export interface SessionTree {
  session_id: string;
  leaf_id: string | null;
  entry_count: number;
  roots: TreeBranch[];
}

export const sessionBranchesRequest = z.object({ session_id: treeSessionId });
/** A tip of the tree (an entry nobody is the parent of). */
export interface SessionBranch extends Omit<TreeEntry, "child_count" | "active"> {
  leaf_id: string;
  /** The nearest ancestor with more than one child (where this branch left another), or null. */
  fork_point_id: string | null;
  /** The tip is the active leaf. */
  active: boolean;
}
export interface SessionBranches {
  session_id: string;
  leaf_id: string | null;
  /** Tips in all (the answer lists the newest MAX_BRANCHES). */
  total: number;
  branches: SessionBranch[];
}

/** `session-tree::set_active_leaf`: switch branch. `entry_id: null` = no leaf (the next append
 * starts a new root); `expected_leaf_id` makes it a compare-and-set (`leaf_conflict`). */
export const setActiveLeafRequest = z.object({
  session_id: treeSessionId,
  entry_id: treeEntryId.nullable(),
  expected_leaf_id: treeEntryId.nullable().optional(),
});
export interface SetActiveLeafResponse {
  session_id: string;
  leaf_id: string | null;
  previous_leaf_id: string | null;
  changed: boolean;
}

/** `session-tree::get_entry` → SessionEntryView, or null (no such entry or session). */
export const getEntryRequest = z.object({ session_id: treeSessionId, entry_id: treeEntryId });
export interface SessionEntryView {
  entry_id: string;
  parent_id: string | null;
  kind: string;
  depth: number;
  timestamp: number;
  revision: number;
  child_count: number;
  /** message and custom_message entries. */
  message?: AgentMessage;
  /** Other kinds (compaction, branch_summary, …): the stored body. */
  data?: unknown;
}

export const EXPORT_FORMATS = ["json", "markdown", "html"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
/** `session-tree::export`: the active path (or the path to `branch_leaf`), every entry on it. */
export const sessionExportRequest = z.object({
  session_id: treeSessionId,
  format: z.enum(EXPORT_FORMATS).default("markdown"),
  branch_leaf: treeEntryId.optional(),
});
export interface SessionExport {
  session_id: string;
  format: ExportFormat;
  content_type: string;
  leaf_id: string | null;
  entry_count: number;
  content: string;
}

// Compaction entries (§5.2, §6.1): written and listed here, summarised by context-compaction.

/** The custom type of a compaction entry's body (a CustomMessage, so `include_custom` readers get
 * a well-formed message; session storage keeps it as entry kind `compaction`). */
export const COMPACTION_CUSTOM_TYPE = "compaction";
/** What a pruned function output reads. */
export const PRUNED_OUTPUT_TEXT = "[output pruned]";

/** Longest summary stored (characters): a summary is a page of bullets; a run-away summariser is cut. */
export const MAX_COMPACTION_SUMMARY_CHARS = 64_000;
/** Most paths one compaction's `details` lists per kind (read / modified files). */
export const MAX_COMPACTION_DETAIL_FILES = 500;
/** Most outputs one session-tree::update_parts call prunes: one statement each in one batch. */
export const MAX_UPDATE_PARTS = 64;
/** Longest replacement text of a pruned output. */
export const MAX_PRUNED_TEXT_CHARS = 4_096;

const compactionSessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
const compactionEntryId = z.string().min(1).max(256);
const compactionFileList = z.array(z.string().min(1).max(4_096)).max(MAX_COMPACTION_DETAIL_FILES);
export const compactionDetailsSchema = z.looseObject({
  read_files: compactionFileList.default([]),
  modified_files: compactionFileList.default([]),
});
export type CompactionDetails = z.infer<typeof compactionDetailsSchema>;

/** `session-tree::compact` (served by session-storage): append a compaction entry under `parent_id`
 * (default: the active leaf; it becomes the leaf, like an append). `tail_start_id` must be a message
 * on the path to it. A repeated `entry_id` appends nothing. → `{entry_id, appended}`. */
export const sessionCompactRequest = z.object({
  session_id: compactionSessionId,
  summary: z.string().min(1).max(MAX_COMPACTION_SUMMARY_CHARS),
  tokens_before: z.number().int().nonnegative().max(1_000_000_000),
  details: compactionDetailsSchema.default({ read_files: [], modified_files: [] }),
  parent_id: compactionEntryId.optional(),
  tail_start_id: compactionEntryId.nullable().optional(),
  entry_id: compactionEntryId.optional(),
});
export type SessionCompactRequest = z.input<typeof sessionCompactRequest>;
/** Most compaction records `session-tree::compactions` returns (the newest ones). */
export const MAX_COMPACTIONS_LISTED = 50;
/** `session-tree::compactions` → `{compactions: CompactionRecord[]}`: the compaction entries on the
 * active path (or the path to `branch_leaf`), oldest first. */
export const sessionCompactionsRequest = z.object({
  session_id: compactionSessionId,
  branch_leaf: compactionEntryId.optional(),
  limit: z.number().int().min(1).max(MAX_COMPACTIONS_LISTED).optional(),
});
/** `session-tree::update_parts`: replace each function_result entry's content with one text block
 * (`text`, default PRUNED_OUTPUT_TEXT) and merge `{compacted_at}` into its details. Every entry must
 * exist and be a function result, else nothing changes. → `{updated, unchanged, skipped}` (skipped:
 * changed by someone else between the read and the write; try again). */
export const sessionUpdatePartsRequest = z.object({
  session_id: compactionSessionId,
  parts: z
    .array(z.object({ entry_id: compactionEntryId, text: z.string().min(1).max(MAX_PRUNED_TEXT_CHARS).optional() }))
    .min(1)
    .max(MAX_UPDATE_PARTS),
});
export interface SessionUpdatePartsResponse {
  updated: { entry_id: string; revision: number }[];
  unchanged: string[];
  skipped: string[];
}

/** A compaction entry as `session-tree::compactions` returns it. `after_message_id`: the nearest
 * message entry before it on the path (null: none) — where its "tail right after the compaction"
 * starts when `tail_start_id` is null. */
export interface CompactionRecord {
  entry_id: string;
  parent_id: string | null;
  after_message_id: string | null;
  summary: string;
  tokens_before: number;
  tail_start_id: string | null;
  details: CompactionDetails;
  timestamp: number;
}
