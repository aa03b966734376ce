// The session storage worker's contracts (docs/harness-contracts.md §5): entries, the session tree
// (`session-tree::fork|clone|tree|branches|set_active_leaf|get_entry|export`) and the compaction
// entries it stores for the compaction worker (`session-tree::compact|compactions|update_parts`).
import { z } from "zod";
import { type AgentMessage, agentMessageSchema, agentMessageValue } from "./messages.ts";

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

// ------------------------------------------------------------------ sessions and inboxes (§5)
// `session-tree::ensure|get|list|append|append_many|messages|update_message` and
// `session-inbox::push|peek|drain`.

/** Longest session id: the same bound `run::start` puts on it. */
export const MAX_SESSION_ID_LENGTH = 128;
/** Longest entry id: deterministic ids are built from a run id and a call id (`e_<run>_<call>`). */
export const MAX_ENTRY_ID_LENGTH = 256;
/** Longest inbox name (`steering`, `followup`, …). */
export const MAX_INBOX_NAME_LENGTH = 64;
/** Longest display name / cwd kept with a session. */
export const MAX_DISPLAY_NAME_LENGTH = 200;
export const MAX_CWD_LENGTH = 4_096;
/** Most entries one append_many takes: each is one statement of the batch, and the id check binds
 * one parameter per entry (D1 binds at most 100 per statement). */
export const MAX_APPEND_MANY = 64;
/** Largest page of `session-tree::messages`. */
export const MAX_PAGE_ENTRIES = 1_000;
/** Largest page of `session-tree::list`. */
export const MAX_LIST_LIMIT = 1_000;

const storedSessionId = z
  .string()
  .min(1)
  .max(MAX_SESSION_ID_LENGTH)
  .refine((s) => !s.includes("/"), "must not contain '/'");
const storedEntryId = z.string().min(1).max(MAX_ENTRY_ID_LENGTH);
const inboxName = z
  .string()
  .min(1)
  .max(MAX_INBOX_NAME_LENGTH)
  .refine((s) => !s.includes("/"), "must not contain '/'");

/** A line of a session listing (`session-tree::list`). */
export const sessionSummarySchema = z.object({
  session_id: z.string(),
  created_at: z.number(),
  updated_at: z.number(),
  entry_count: z.number(),
  display_name: z.string().optional(),
  last_message_summary: z.string().optional(),
});
export type SessionSummary = z.infer<typeof sessionSummarySchema>;
/** `session-tree::get`: a session's metadata. */
export const sessionInfoSchema = sessionSummarySchema.extend({
  cwd: z.string().optional(),
  /** Leaves of the tree (entries nobody is the parent of). */
  branch_count: z.number(),
  leaf_id: z.string().nullable(),
  /** Set when the session was made by session-tree::fork / clone. */
  origin: z.lazy(() => sessionOriginSchema).optional(),
});
export type SessionInfo = z.infer<typeof sessionInfoSchema>;
/** One message of a path, as `session-tree::messages` pages it. */
export const pathMessageSchema = z.object({ entry_id: z.string(), message: agentMessageValue, revision: z.number() });
export type PathMessage = z.infer<typeof pathMessageSchema>;

/** Request and response of each `session-tree::*` / `session-inbox::*` function above. */
export const sessionStorageContracts = {
  "session-tree::ensure": {
    request: z.object({
      session_id: storedSessionId,
      display_name: z.string().max(MAX_DISPLAY_NAME_LENGTH).optional(),
      cwd: z.string().max(MAX_CWD_LENGTH).optional(),
      /** Who owns it (the orchestrator names the owner its run recorded); kept for listings. */
      owner: z.string().min(1).max(128).optional(),
    }),
    response: z.object({ session_id: z.string(), created: z.boolean() }),
  },
  "session-tree::get": { request: z.object({ session_id: storedSessionId }), response: sessionInfoSchema.nullable() },
  "session-tree::list": {
    request: z
      .object({
        limit: z.number().int().min(1).max(MAX_LIST_LIMIT).optional(),
        offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
        order: z.enum(["asc", "desc"]).optional(),
      })
      .default({}),
    response: z.object({ sessions: z.array(sessionSummarySchema), total: z.number() }),
  },
  "session-tree::append": {
    request: z.object({
      session_id: storedSessionId,
      message: agentMessageSchema,
      entry_id: storedEntryId.optional(),
      parent_id: storedEntryId.optional(),
    }),
    response: z.object({ entry_id: z.string(), appended: z.boolean() }),
  },
  "session-tree::append_many": {
    request: z.object({
      session_id: storedSessionId,
      entries: z.array(z.object({ entry_id: storedEntryId.optional(), message: agentMessageSchema })).max(MAX_APPEND_MANY),
      parent_id: storedEntryId.optional(),
    }),
    response: z.object({ entry_ids: z.array(z.string()), appended: z.number() }),
  },
  "session-tree::messages": {
    request: z.object({
      session_id: storedSessionId,
      branch_leaf: storedEntryId.optional(),
      limit: z.number().int().min(1).max(MAX_PAGE_ENTRIES).optional(),
      cursor: z.string().min(1).max(4_096).optional(),
      include_custom: z.boolean().optional(),
    }),
    response: z.object({ messages: z.array(pathMessageSchema), next_cursor: z.string().nullable() }),
  },
  "session-tree::update_message": {
    request: z.object({ session_id: storedSessionId, entry_id: storedEntryId, message: agentMessageSchema }),
    response: z.object({ ok: z.literal(true), revision: z.number() }),
  },
  "session-inbox::push": {
    request: z.object({
      name: inboxName,
      session_id: storedSessionId,
      item: z.unknown().refine((v) => v !== undefined, "item is required"),
    }),
    /** `ok` false (`error: "inbox_full"`) when the inbox is full. */
    response: z.object({ ok: z.boolean(), size: z.number(), error: z.literal("inbox_full").optional() }),
  },
  "session-inbox::peek": {
    request: z.object({ name: inboxName, session_id: storedSessionId }),
    response: z.object({ items: z.array(z.unknown()) }),
  },
  "session-inbox::drain": {
    request: z.object({ name: inboxName, session_id: storedSessionId }),
    response: z.object({ items: z.array(z.unknown()) }),
  },
} as const;
export type SessionStorageFunctionId = keyof typeof sessionStorageContracts;

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
export const sessionOriginSchema = z.object({
  kind: z.enum(["fork", "clone"]),
  source_session_id: z.string(),
  /** The entry a fork was taken at (its copy is the fork's first leaf); null for a clone. */
  from_entry_id: z.string().nullable(),
});
export type SessionOrigin = z.infer<typeof sessionOriginSchema>;
export const sessionCopyResponse = sessionOriginSchema.extend({
  session_id: z.string(),
  /** The copy's active leaf (the copy of `from_entry_id`, or of the source's leaf). */
  leaf_id: z.string().nullable(),
  entry_count: z.number(),
  /** false: this request had made the copy already; nothing was written. */
  created: z.boolean(),
});
export type SessionCopyResponse = z.infer<typeof sessionCopyResponse>;

/** `session-tree::tree`: the whole tree, or the subtree under `from_entry_id`. */
export const sessionTreeRequest = z.object({ session_id: treeSessionId, from_entry_id: treeEntryId.optional() });
/** One entry of a tree or branch listing: what a UI needs to draw it, never the whole message. */
const treeEntryFields = {
  entry_id: z.string(),
  kind: z.string(),
  depth: z.number(),
  timestamp: z.number(),
  /** The message's role (message and custom_message entries). */
  role: z.string().optional(),
  /** The first text of the entry, flattened and cut to one line. */
  preview: z.string().optional(),
  /** An assistant entry's first function call (the target of an `agent_trigger`). */
  call: z.string().optional(),
  /** A function_result entry's function. */
  function_id: z.string().optional(),
};
export const treeEntrySchema = z.object({
  ...treeEntryFields,
  child_count: z.number(),
  /** On the path from a root to the active leaf. */
  active: z.literal(true).optional(),
});
export type TreeEntry = z.infer<typeof treeEntrySchema>;
/** A branch: a run of entries, each the only child of the one before; `children` are the branches
 * that start under its last entry. `truncated`: nested too deep for one answer — ask again with
 * `from_entry_id` = its last entry. */
export interface TreeBranch {
  entries: TreeEntry[];
  children: TreeBranch[];
  truncated?: true;
}
export const treeBranchSchema: z.ZodType<TreeBranch> = z.lazy(() =>
  z.object({ entries: z.array(treeEntrySchema), children: z.array(treeBranchSchema), truncated: z.literal(true).optional() }),
);
/** `session-tree::tree`'s answer. */
export const sessionTreeResponse = z.object({
  session_id: z.string(),
  leaf_id: z.string().nullable(),
  entry_count: z.number(),
  roots: z.array(treeBranchSchema),
});
export type SessionTree = z.infer<typeof sessionTreeResponse>;

export const sessionBranchesRequest = z.object({ session_id: treeSessionId });
/** A tip of the tree (an entry nobody is the parent of). */
export const sessionBranchSchema = z.object({
  ...treeEntryFields,
  leaf_id: z.string(),
  /** The nearest ancestor with more than one child (where this branch left another), or null. */
  fork_point_id: z.string().nullable(),
  /** The tip is the active leaf. */
  active: z.boolean(),
});
export type SessionBranch = z.infer<typeof sessionBranchSchema>;
/** `session-tree::branches`'s answer. */
export const sessionBranchesResponse = z.object({
  session_id: z.string(),
  leaf_id: z.string().nullable(),
  /** Tips in all (the answer lists the newest MAX_BRANCHES). */
  total: z.number(),
  branches: z.array(sessionBranchSchema),
});
export type SessionBranches = z.infer<typeof sessionBranchesResponse>;

/** `session-tree::set_active_leaf`: switch branch. `entry_id: null` = no leaf (the next append
 * starts a new root); `expected_leaf_id` makes it a compare-and-set (`leaf_conflict`). */
export const setActiveLeafRequest = z.object({
  session_id: treeSessionId,
  entry_id: treeEntryId.nullable(),
  expected_leaf_id: treeEntryId.nullable().optional(),
});
export const setActiveLeafResponse = z.object({
  session_id: z.string(),
  leaf_id: z.string().nullable(),
  previous_leaf_id: z.string().nullable(),
  changed: z.boolean(),
});
export type SetActiveLeafResponse = z.infer<typeof setActiveLeafResponse>;

/** `session-tree::get_entry` → SessionEntryView, or null (no such entry or session). */
export const getEntryRequest = z.object({ session_id: treeSessionId, entry_id: treeEntryId });
export const sessionEntryViewSchema = z.object({
  entry_id: z.string(),
  parent_id: z.string().nullable(),
  kind: z.string(),
  depth: z.number(),
  timestamp: z.number(),
  revision: z.number(),
  child_count: z.number(),
  /** message and custom_message entries. */
  message: agentMessageValue.optional(),
  /** Other kinds (compaction, branch_summary, …): the stored body. */
  data: z.unknown().optional(),
});
export type SessionEntryView = z.infer<typeof sessionEntryViewSchema>;
export const getEntryResponse = sessionEntryViewSchema.nullable();

export const EXPORT_FORMATS = ["json", "markdown", "html"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
/** `session-tree::export`: the active path (or the path to `branch_leaf`), every entry on it. */
export const sessionExportRequest = z.object({
  session_id: treeSessionId,
  format: z.enum(EXPORT_FORMATS).default("markdown"),
  branch_leaf: treeEntryId.optional(),
});
/** `session-tree::export`'s answer. */
export const sessionExportResponse = z.object({
  session_id: z.string(),
  format: z.enum(EXPORT_FORMATS),
  content_type: z.string(),
  leaf_id: z.string().nullable(),
  entry_count: z.number(),
  content: z.string(),
});
export type SessionExport = z.infer<typeof sessionExportResponse>;

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
export const sessionUpdatePartsResponse = z.object({
  updated: z.array(z.object({ entry_id: z.string(), revision: z.number() })),
  unchanged: z.array(z.string()),
  skipped: z.array(z.string()),
});
export type SessionUpdatePartsResponse = z.infer<typeof sessionUpdatePartsResponse>;

/** A compaction entry as `session-tree::compactions` returns it. `after_message_id`: the nearest
 * message entry before it on the path (null: none) — where its "tail right after the compaction"
 * starts when `tail_start_id` is null. */
export const compactionRecordSchema = z.object({
  entry_id: z.string(),
  parent_id: z.string().nullable(),
  after_message_id: z.string().nullable(),
  summary: z.string(),
  tokens_before: z.number(),
  tail_start_id: z.string().nullable(),
  details: compactionDetailsSchema,
  timestamp: z.number(),
});
export type CompactionRecord = z.infer<typeof compactionRecordSchema>;
/** `session-tree::compactions`'s answer. */
export const sessionCompactionsResponse = z.object({ compactions: z.array(compactionRecordSchema) });
/** `session-tree::compact`'s answer: `appended` false when `entry_id` was there already. */
export const sessionCompactResponse = z.object({ entry_id: z.string(), appended: z.boolean() });

/** The branching functions of `session-tree::*` (fork, clone, tree, branches, set_active_leaf, get_entry,
 * export, and export_html, the name iii's own harness uses): each one's request and answer. */
export const sessionTreeContracts = {
  "session-tree::fork": { request: sessionForkRequest, response: sessionCopyResponse },
  "session-tree::clone": { request: sessionCloneRequest, response: sessionCopyResponse },
  "session-tree::tree": { request: sessionTreeRequest, response: sessionTreeResponse },
  "session-tree::branches": { request: sessionBranchesRequest, response: sessionBranchesResponse },
  "session-tree::set_active_leaf": { request: setActiveLeafRequest, response: setActiveLeafResponse },
  "session-tree::get_entry": { request: getEntryRequest, response: getEntryResponse },
  "session-tree::export": { request: sessionExportRequest, response: sessionExportResponse },
  "session-tree::export_html": { request: sessionExportRequest.omit({ format: true }), response: z.object({ html: z.string() }) },
} as const;
export type SessionTreeFunctionId = keyof typeof sessionTreeContracts;
