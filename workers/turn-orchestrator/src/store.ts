// The turn record's store (docs/harness-contracts.md §2.4). Every write is a compare-and-set against the
// value this step read or last wrote, so of two steps racing on one record exactly one wins; a save
// that changes the state to a stepable one carries the next step's queue message in the same write
// ("saving is the wake"); checkpoints write without waking anyone.
import type { AgentEvent, TurnStateRecord, TurnStateView } from "@iii-edge/protocol/harness";
import { compareAndSet, tracerOf, type Tracer } from "@iii-edge/sdk-edge/worker";
import { callRequired, errorText, isTransportFailure, TransientError, type Trigger } from "./calls.ts";
import { SCOPE_TURN_STATE, STOP_MERGE_ATTEMPTS, STORAGE_TIMEOUT_MS, TURN_STEP_QUEUE } from "./constants.ts";
import { EventLog } from "./events.ts";
import { canonicalJson, isStepable, isTerminal, jsonCopy, parseRecord, sameJson, stepKey, viewOf } from "./record.ts";
import { endTurnTrace } from "./trace.ts";
import { fireTurnCompleted } from "./turn-events.ts";

/** Someone else moved the record since this step read it: the step stops (it does not retry). */
export class StateConflict extends Error {
  constructor(sid: string) {
    super(`turn record of ${sid} changed under this step`);
    this.name = "StateConflict";
  }
}

export interface Loaded {
  rec: TurnStateRecord;
  /** The value exactly as stored: what the next compare-and-set expects. */
  raw: unknown;
}

/** The queue message a save carries: `turn::<state> {session_id, step}` on `turn-step`. */
export interface StepMessage {
  function_id: string;
  payload: { session_id: string; step: number; queued: true };
  queue: string;
  idempotency_key: string;
}

export function stepMessage(sid: string, state: string, step: number, key = stepKey(sid, step)): StepMessage {
  return { function_id: `turn::${state}`, payload: { session_id: sid, step, queued: true }, queue: TURN_STEP_QUEUE, idempotency_key: key };
}

export async function loadRaw(trigger: Trigger, sid: string): Promise<unknown> {
  return callRequired<unknown>(trigger, "state::get", { scope: SCOPE_TURN_STATE, key: sid });
}

export async function loadRecord(trigger: Trigger, sid: string): Promise<Loaded | undefined> {
  const raw = await loadRaw(trigger, sid);
  const rec = parseRecord(raw);
  return rec ? { rec, raw } : undefined;
}

/** Enqueue a step by itself (wakes from outside a save: approvals, `turn::stop`). The engine
 * stores the message; the function is not looked up now. */
export async function enqueue(trigger: Trigger, msg: StepMessage): Promise<void> {
  try {
    await trigger({
      function_id: msg.function_id,
      payload: msg.payload,
      action: { type: "enqueue", queue: msg.queue, idempotency_key: msg.idempotency_key },
      timeoutMs: STORAGE_TIMEOUT_MS,
    });
  } catch (e) {
    if (isTransportFailure(e)) throw new TransientError(`enqueue ${msg.function_id}: ${errorText(e)}`, { cause: e });
    throw e;
  }
}

/** One compare-and-set write of the record; returns the value now stored. */
async function casWrite(trigger: Trigger, rec: TurnStateRecord, expected: unknown, msg: StepMessage | undefined): Promise<unknown> {
  return casWriteValue(trigger, rec.session_id, jsonCopy(rec), expected, msg);
}

/** The compare-and-set itself, of a stored value as given. */
export async function casWriteValue(trigger: Trigger, sid: string, value: unknown, expected: unknown, msg?: StepMessage): Promise<unknown> {
  let w: Awaited<ReturnType<typeof compareAndSet>>;
  try {
    w = await compareAndSet(trigger, { scope: SCOPE_TURN_STATE, key: sid }, value, expected, {
      timeoutMs: STORAGE_TIMEOUT_MS,
      ...(msg ? { extra: { enqueue: msg } } : {}),
    });
  } catch (e) {
    if (isTransportFailure(e)) throw new TransientError(`saving the turn record: ${errorText(e)}`, { cause: e });
    throw e;
  }
  if (!w.written) throw new StateConflict(sid);
  const out = w.answer as { messageReceiptId?: unknown } | undefined;
  // The engine stores the step message in the write's own transaction (protocol/README.md §7.2): a
  // write that answers without a receipt came from an engine that dropped `enqueue`, and the run
  // would sit in a stepable state with no step queued — refuse loudly instead.
  if (msg && typeof out?.messageReceiptId !== "string")
    throw new Error("the engine did not enqueue the step with the record (state::update `enqueue` unsupported): upgrade the engine");
  return value;
}

/** `a` and `b` differ at most in what outside writers put into a live record: `turn::stop`'s
 * `stop_requested` and `harness::send`'s `merge_seq`. */
function onlyStopDiffers(a: unknown, b: unknown): boolean {
  if (!a || !b || typeof a !== "object" || typeof b !== "object") return false;
  const strip = (v: object) => canonicalJson({ ...v, stop_requested: null, merge_seq: null });
  return strip(a) === strip(b);
}

/**
 * Compare-and-set, merging a concurrent `turn::stop` or merged send: their fields are the only
 * outside writes into a live record, so a conflict caused by them alone is retried with them kept.
 * Anything else that moved the record is a StateConflict.
 */
export async function writeRecord(trigger: Trigger, rec: TurnStateRecord, expected: unknown, msg?: StepMessage): Promise<unknown> {
  let exp = expected;
  for (let attempt = 0; ; attempt++) {
    try {
      return await casWrite(trigger, rec, exp, msg);
    } catch (e) {
      if (!(e instanceof StateConflict) || attempt + 1 >= STOP_MERGE_ATTEMPTS) throw e;
      const current = await loadRaw(trigger, rec.session_id);
      if (!onlyStopDiffers(current, exp)) throw e;
      const outside = parseRecord(current);
      if (outside?.stop_requested) rec.stop_requested = true;
      if (outside?.merge_seq !== undefined) rec.merge_seq = Math.max(rec.merge_seq ?? 0, outside.merge_seq);
      exp = current;
    }
  }
}

/**
 * One step's hold on a record: the record being changed, the value last written (for the next
 * compare-and-set), and the events that may only go out once the state they report is saved.
 */
export class Tx {
  readonly trigger: Trigger;
  /** Where the turn's spans go (./trace.ts); records nothing when the surface has no tracer. */
  readonly tracer: Tracer;
  readonly events: EventLog;
  rec: TurnStateRecord;
  /** The record as of the last write (or the load), and its stored value. */
  private written: TurnStateRecord | undefined;
  private raw: unknown;
  private pending: AgentEvent[] = [];

  constructor(trigger: Trigger, sid: string, loaded: Loaded | undefined, fresh?: TurnStateRecord, tracer?: Tracer, events?: EventLog) {
    this.trigger = trigger;
    this.tracer = tracer ?? tracerOf({});
    // A chain of steps (runSteps) shares one log: its events stay in order across the steps.
    this.events = events ?? new EventLog(trigger, sid);
    this.written = loaded ? structuredClone(loaded.rec) : undefined;
    this.raw = loaded?.raw ?? null;
    // The working copy is a deep copy: handler mutations never leak into `written`, which must stay
    // the value read for the compare-and-set to mean anything.
    this.rec = fresh ?? structuredClone(loaded!.rec);
  }

  get sid(): string {
    return this.rec.session_id;
  }

  /** The record as last persisted (a copy). */
  persisted(): TurnStateRecord | undefined {
    return this.written ? structuredClone(this.written) : undefined;
  }

  /** Emit `event` once the next write has committed. */
  afterSave(event: AgentEvent): void {
    this.pending.push(event);
  }

  /**
   * Emit `event` now, after the events this step holds for its write (in emission order): for what
   * a UI may see before the step's state is saved. A crash before the save runs the step again,
   * which emits it again, as it does the deltas already out.
   */
  emitNow(event: AgentEvent): void {
    for (const e of this.pending.splice(0)) this.events.emit(e);
    this.events.emit(event);
  }

  /** A silent progress write (per-call checkpoints): no step, no wake. */
  async checkpoint(): Promise<void> {
    await this.write(undefined);
  }

  /**
   * `saveRecord`: write the record; when its state changed, bump `step` and — for a stepable state
   * — enqueue `turn::<state> {session_id, step}` in the same write.
   */
  async save(): Promise<void> {
    const changed = !this.written || this.written.state !== this.rec.state;
    if (changed) this.rec.step = (this.written?.step ?? 0) + 1;
    const msg = changed && isStepable(this.rec.state) ? stepMessage(this.sid, this.rec.state, this.rec.step) : undefined;
    await this.write(msg);
  }

  /** Replace the working copy with the persisted one and forget its unsent events (a failure
   * path starting clean). */
  resetToPersisted(): void {
    if (this.written) this.rec = structuredClone(this.written);
    this.pending = [];
  }

  private async write(msg: StepMessage | undefined): Promise<void> {
    this.rec.updated_at_ms = Date.now();
    const before = this.written;
    const stored = await writeRecord(this.trigger, this.rec, this.raw, msg);
    this.raw = stored;
    // The run ended with this write: its invoke_agent span ends with it.
    if (isTerminal(this.rec.state) && (!before || !isTerminal(before.state)))
      endTurnTrace(this.tracer, this.rec, { provider: this.rec.last_assistant?.provider, model: this.rec.last_assistant?.model });
    this.written = structuredClone(this.rec);
    const events = this.pending;
    this.pending = [];
    const ends = events.filter((e) => e.type === "agent_end");
    for (const e of events) if (e.type !== "agent_end") this.events.emit(e);
    const oldView: TurnStateView | undefined = before ? viewOf(before) : undefined;
    const newView = viewOf(this.rec);
    if (!oldView || !sameJson(oldView, newView)) {
      const ev: AgentEvent = { type: "turn_state_changed", event_type: before ? "state:updated" : "state:created", new_value: newView };
      if (oldView) ev.old_value = oldView;
      this.events.emit(ev);
    }
    for (const e of ends) this.events.emit(e);
    // iii's `harness::turn_completed`: this write is the one that made the run terminal, and the
    // compare-and-set lets exactly one write do that per run, so it fires at most once.
    // The run's own events go out first, so a listener never hears of the end before a follower of
    // `agent::events` can.
    if (isTerminal(this.rec.state) && (!before || !isTerminal(before.state))) {
      await this.events.flush();
      await fireTurnCompleted(this.trigger, this.rec);
    }
  }
}
