// Names and bounds of the sub-agents worker. The limits a model meets (depth, fan-out, per tree,
// join timeouts) are contracts in `@iii-edge/protocol/harness` (section "sub-agents"); these are
// the worker's own. Every number says why it is that number.

// State scopes this worker owns.
/** `<child session id>` → SubAgentLink: who spawned the child, its tree, its waits, its end. */
export const SCOPE_LINKS = "sub_agent_links";
/** `<parent session id>` → ParentRecord: the children a session spawned (fan-out, cascade). */
export const SCOPE_PARENTS = "sub_agent_parents";
/** `<root session id>:<root run id>` → `{spawned}`: sessions spawned under one root run. */
export const SCOPE_TREES = "sub_agent_trees";
/** `<parent session id>/<function call id>` → JoinWait: a parent's call parked on a child. */
export const SCOPE_WAITS = "sub_agent_waits";

/** Internal function ids: the per-child trigger handlers and the sweep (hidden from listings and
 * from the model's catalog; under `harness::` so the default policy denies them to agents). */
export const ON_CHILD_STATE = "harness::sub_agents::child_state";
export const ON_CHILD_EVENT = "harness::sub_agents::child_event";
export const SWEEP = "harness::sub_agents::sweep";

/** State reads and writes, trigger registrations: small local calls. */
export const STORAGE_TIMEOUT_MS = 15_000;
/** `run::start` of a child: a claim, a session, the seed message and the first record. */
export const RUN_START_TIMEOUT_MS = 30_000;
/** One child's `turn::stop`, which cascades to its own children before it answers. */
export const STOP_TIMEOUT_MS = 10_000;
/** `approval::resolve` (the wake of a parked join): one state write. */
export const RESOLVE_TIMEOUT_MS = 10_000;
/** Budget calls (the share of a parent budget): local compare-and-set writes. */
export const BUDGET_TIMEOUT_MS = 10_000;
/** Compare-and-set retries on one of this worker's records: writers are a spawn, a join and a
 * child's end at the same moment; more conflicts than this means something is looping. */
export const CAS_ATTEMPTS = 8;
/** A link whose child has written no turn record this long after the spawn belongs to a spawn that
 * died before `run::start` (the orchestrator's own start claim lasts as long): it is not live. */
export const START_GRACE_MS = 60_000;
/** Parked joins on one child: its parent may join it from several calls; more is a loop. */
export const MAX_WAITERS_PER_CHILD = 16;
/** The join sweep (expired waits, missed ends), bound only while a join is parked: every 15 s, so
 * a `timeout_ms` is honoured to within 15 s and a lost wake is repaired within 15 s, at one small
 * state listing per tick. */
export const SWEEP_CRON = "*/15 * * * * *";
/** A wait already woken whose call never came back for its result (the parent was stopped) is
 * dropped after this. */
export const WOKEN_WAIT_TTL_MS = 60 * 60_000;
/** Waits one sweep reads per page, and the most pages per tick (10 000 parked joins: far past
 * SUB_AGENT_MAX_PER_TREE × any realistic number of live trees). */
export const SWEEP_PAGE = 500;
export const SWEEP_MAX_PAGES = 20;
/** Links kept in memory for the event mirror (a cache: every entry can be read again). */
export const LINK_CACHE_MAX = 1_000;
/** A task as `harness::children` shows it (the whole task is the child's first message). */
export const TASK_PREVIEW_CHARS = 500;
/** Longest error text kept on a record or shown to a model. */
export const MAX_ERROR_TEXT = 2_000;
