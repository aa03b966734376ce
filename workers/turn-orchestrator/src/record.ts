// The persisted turn record (`turn_state/<sid>`, docs/harness-contracts.md §2.2): how it is read back
// (leniently, with the function-batch states checked strictly), what clients see of it, and the
// deterministic ids derived from it.
import { formatIssues } from "@iii-edge/protocol";
import { z } from "zod";
import {
  STEPABLE_STATES,
  TERMINAL_STATES,
  TURN_STATES,
  type AssistantMessage,
  type TurnState,
  type TurnStateRecord,
  type TurnStateView,
} from "@iii-edge/protocol/harness";
import { EVENT_SEQ_DIGITS, MAX_ENTRY_ID, MAX_IDEMPOTENCY_KEY } from "./constants.ts";

/** A broken invariant of a record (a function-batch state without its batch, …): the step fails. */
export class InvariantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvariantError";
  }
}

const looseObject = z.looseObject({});
const callCheckpoint = z.enum(["triggered", "pending", "done"]);
const functionCall = z.looseObject({ id: z.string(), function_id: z.string(), arguments: z.unknown() });
const functionResult = z.looseObject({ content: z.array(looseObject), details: z.unknown(), terminate: z.boolean().optional() });
const preparedCall = z.union([
  z.looseObject({ route: z.literal("dispatch"), call: functionCall }),
  z.looseObject({ route: z.literal("pre_approved"), call: functionCall }),
  z.looseObject({ route: z.literal("synthetic"), call: functionCall, result: functionResult, is_error: z.boolean().optional() }),
]);
const executedCall = z.looseObject({ call: functionCall, result: functionResult, is_error: z.boolean(), duration_ms: z.number() });
const awaiting = z.looseObject({
  function_call_id: z.string(),
  function_id: z.string(),
  args: z.unknown(),
  pending_at: z.number().optional(),
  expires_at: z.number().optional(),
});
const assistant = z.looseObject({ role: z.literal("assistant"), content: z.array(looseObject), stop_reason: z.string() });

/** Lenient: counters and lists default, unknown fields pass (docs/harness-contracts.md §2.2 "parsed
 * leniently"). */
const recordSchema = z.looseObject({
  session_id: z.string(),
  state: z.enum(TURN_STATES),
  step: z.number().int().catch(0),
  turn_count: z.number().int().catch(0),
  max_turns: z.number().int().positive().optional().catch(undefined),
  last_assistant: assistant.nullable().optional(),
  function_results: z.array(looseObject).catch([]),
  turn_end_emitted: z.boolean().catch(false),
  started_at_ms: z.number().catch(0),
  updated_at_ms: z.number().catch(0),
  assistant_body_streamed: z.boolean().optional().catch(undefined),
  model_meta: looseObject.nullable().optional().catch(undefined),
  error: z.object({ kind: z.string(), message: z.string() }).optional().catch(undefined),
  stop_requested: z.boolean().optional().catch(undefined),
  work: z
    .looseObject({
      prepared: z.array(preparedCall),
      executed: z.record(z.string(), executedCall).catch({}),
      calls: z.record(z.string(), callCheckpoint).catch({}),
    })
    .optional(),
  awaiting_approval: z.array(awaiting).optional(),
  run_id: z.string().catch(""),
});

/** A stored value as a record, or undefined if it is not one (absent, or not a record at all). */
export function parseRecord(value: unknown): TurnStateRecord | undefined {
  if (value === undefined || value === null) return undefined;
  const r = recordSchema.safeParse(value);
  if (!r.success) throw new InvariantError(`the stored turn record is unreadable: ${formatIssues(r.error)}`);
  // The schema checked the discriminating fields; the content blocks are
  // the shapes of docs/harness-contracts.md §4.4 as written.
  return r.data as unknown as TurnStateRecord;
}

/** Function-batch states are checked strictly (§2.2): a violation fails the step. */
export function requireBatch(rec: TurnStateRecord): { last: AssistantMessage; work: NonNullable<TurnStateRecord["work"]> } {
  if (!rec.last_assistant) throw new InvariantError(`${rec.state} without last_assistant`);
  if (!rec.work) throw new InvariantError(`${rec.state} without work`);
  return { last: rec.last_assistant, work: rec.work };
}

export const isTerminal = (s: TurnState): boolean => TERMINAL_STATES.includes(s);
export const isStepable = (s: TurnState): boolean => STEPABLE_STATES.includes(s);

/** What clients see (`turn::get_state`, `turn_state_changed`): never `work` or `last_assistant`. */
export function viewOf(rec: TurnStateRecord): TurnStateView {
  const v: TurnStateView = { session_id: rec.session_id, state: rec.state, turn_count: rec.turn_count };
  if (rec.max_turns !== undefined) v.max_turns = rec.max_turns;
  if (rec.awaiting_approval && rec.awaiting_approval.length > 0) v.awaiting_approval = rec.awaiting_approval.map((a) => ({ ...a }));
  if (rec.error) v.error = { ...rec.error };
  return v;
}

/** JSON text with sorted keys: equal values compare equal whatever their key order (as the
 * engine's compare-and-set compares them). */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}
export const sameJson = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);

/** A plain JSON copy (what the store holds after a write): `undefined` fields drop out. */
export function jsonCopy<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

// ------------------------------------------------------------------ deterministic ids (§2.6)

/** `id` if it fits in `max` characters, else its head plus a digest of the whole. */
function bounded(id: string, max: number): string {
  return id.length <= max ? id : `${id.slice(0, max - 10)}#${shortHash(id)}`;
}
const entryId = (id: string): string => bounded(id, MAX_ENTRY_ID);

export const seedEntryId = (runId: string, i: number): string => entryId(`e_${runId}_user_${i}`);
export const assistantEntryId = (runId: string, turn: number): string => entryId(`e_${runId}_${turn}_assistant`);
export const resultEntryId = (runId: string, callId: string): string => entryId(`e_${runId}_${callId}`);
export const inboxEntryId = (runId: string, inbox: "steer" | "followup", turn: number, i: number): string =>
  entryId(`e_${runId}_${inbox}_${turn}_${i}`);
export const maxTurnsEntryId = (runId: string, turn: number): string => entryId(`e_${runId}_${turn}_max_turns`);

/** `agent::events` item id: `<sid>-<seq padded>` so a group's items sort by sequence. */
export const eventItemId = (sid: string, seq: number): string => `${sid}-${String(seq).padStart(EVENT_SEQ_DIGITS, "0")}`;
/** The sequence number of an item id of session `sid`, or undefined if it is not one. */
export function eventSeqOf(sid: string, itemId: string): number | undefined {
  if (!itemId.startsWith(`${sid}-`)) return undefined;
  const tail = itemId.slice(sid.length + 1);
  if (!/^\d+$/.test(tail)) return undefined;
  return Number(tail);
}

/** FNV-1a (32-bit) as hex: a short stable digest for keys that would run past the engine's bounds. */
export function shortHash(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** An idempotency key within the engine's bound (long ones keep a readable head plus a digest). */
export const boundedKey = (key: string): string => bounded(key, MAX_IDEMPOTENCY_KEY);

/** The idempotency key of the step a save enqueues (`<sid>:<step>`, §2.4). */
export const stepKey = (sid: string, step: number): string => boundedKey(`${sid}:${step}`);
