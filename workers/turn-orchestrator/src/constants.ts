// Names and bounds of the turn-orchestrator. Every limit says why it is that number.
import { MAX_APPEND_MANY, MAX_ENTRY_ID_LENGTH } from "@iii-edge/protocol/harness";

/** State scopes this worker owns (docs/harness-contracts.md §1.2), one scope per kind of fact, each keyed
 * by session id. */
export const SCOPE_TURN_STATE = "turn_state";
export const SCOPE_RUN_REQUEST = "run_request";
export const SCOPE_SESSION_INDEX = "session_index";
export const SCOPE_EVENT_COUNTER = "event_counter";
/** `<subscription id>` → `{session_id, function_id}`: who `turn::subscribe` asked to be told (public.ts). */
export const SCOPE_SUBSCRIPTIONS = "turn_subscriptions";
/** `<idempotency_key>` → `{session_id, turn_id, ts}`: what a `harness::send` key first produced (surface.ts). */
export const SCOPE_IDEMPOTENCY = "harness_idem";
/** Written by approval-gate (`<sid>/<cid>`), read and deleted here. */
export const SCOPE_APPROVALS = "approvals";

/** The durable FIFO queue (grouped by `session_id`) that carries `turn::<state>` steps (§2.4). */
export { TURN_STEP_QUEUE } from "@iii-edge/protocol/harness";

/** The policy gate's budget (§3.3): past it the call is denied `gate_unavailable`. */
export const POLICY_TIMEOUT_MS = 5_000;
/** The provider stream's total budget (§1.4, §4.2: 300 s enforced by the caller). */
export const PROVIDER_TIMEOUT_MS = 300_000;
/** After the provider call settled without a terminal frame, how long items already written may
 * still take to arrive through the channel before the stream is given up as broken. */
export const PROVIDER_DRAIN_GRACE_MS = 2_000;
/** `provisioning::prepare` may create a sandbox (300 s, §1.3) and fetch skills; it must still end
 * inside the step's queue deadline (360 s, `turn-step` timeout_ms). */
export const PROVISIONING_TIMEOUT_MS = 330_000;
/** `provisioning::release` is best effort at the end of a run; a slow one must not hold the step. */
export const RELEASE_TIMEOUT_MS = 15_000;
/** One call the model makes. Calls of a batch run one after another inside one step, so a slow
 * target must give up well before the step's 360 s queue deadline. */
export const FUNCTION_CALL_TIMEOUT_MS = 120_000;
/** Session-storage and state round trips: small local reads and writes. */
export const STORAGE_TIMEOUT_MS = 30_000;
/** Transcript page size (`session-tree::messages` limit) and the most pages one step reads
 * (50 000 messages: far past any context window; a longer transcript is a bug upstream). */
export const TRANSCRIPT_PAGE_SIZE = 500;
export const TRANSCRIPT_MAX_PAGES = 100;
/** A `state_conflict` on the record whose only difference is `turn::stop`'s flag is merged and
 * retried; more than this many in one write means something else is moving the record. */
export const STOP_MERGE_ATTEMPTS = 3;
/** `turn::stop`'s compare-and-set loop against steps saving the record at the same time. */
export const STOP_CAS_ATTEMPTS = 8;
/** A run::start claim (its run_request) younger than this, with no record of its run yet, means a
 * start is in progress: a second start is busy. Older ones are from a start that died midway. */
export const START_CLAIM_TTL_MS = 60_000;
/** A subscriber's handling of one notice: inside the engine's 30 s deadline for the fire that
 * carries it, so a slow subscriber is retried as a failure of its own, not as a lost relay. */
export const SUBSCRIBER_TIMEOUT_MS = 25_000;
/** `run::events` default page (the most is RUN_EVENTS_MAX_LIMIT): one `stream::list_items` call. */
export const EVENTS_DEFAULT_LIMIT = 200;
/** Sequence numbers a step reserves with one counter write (events beyond it reserve another
 * block): a step emits a handful of events, a long streamed answer a few hundred. */
export const EVENT_ID_BLOCK = 256;
/** Digits of the zero-padded event sequence in item ids (`<sid>-000000000042`), so ids sort by seq:
 * 10^12 / EVENT_ID_BLOCK leaves billions of steps per session. */
export const EVENT_SEQ_DIGITS = 12;
/** Longest error text kept on a record or shown to a model. */
export const MAX_ERROR_TEXT = 2_000;
/** The engine refuses idempotency keys longer than this (protocol frames.ts). */
export const MAX_IDEMPOTENCY_KEY = 256;
/** Session storage refuses entry ids longer than this; ids built from a model's call id are cut
 * to fit (with a digest, so two long ids stay distinct). */
export const MAX_ENTRY_ID = MAX_ENTRY_ID_LENGTH;
/** Session storage appends at most this many entries per `session-tree::append_many`. */
export const APPEND_MANY_MAX = MAX_APPEND_MANY;

/** Model and provider names of messages the orchestrator writes itself. */
export const HARNESS_MODEL = "harness";
export const STOPPED_BY_USER_TEXT = "run stopped by user";
