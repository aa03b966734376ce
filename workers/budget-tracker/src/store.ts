// The budgets in engine state (scope `budgets`, key `budget:<id>`) and their spend logs (scope
// `budget_spend_log:<id>`). Every change is read → decide (./ledger.ts) → compare-and-set (the
// worker kit's casState); a `state_conflict` (another copy of this worker, or another call of this
// one, changed the budget in between) re-reads and decides again. Nothing is held in memory
// between calls, so the worker can run as many copies as it likes.
import { IIIError } from "@iii-edge/protocol";
import { BUDGETS_SCOPE, budgetSpendLogScope, budgetState } from "@iii-edge/protocol/harness";
import { parseBudget, parseLogEntry, rollTo, type BudgetRecord, type StoredLogEntry } from "./ledger.ts";
import { casState, compareAndSet, type Trigger } from "@iii-edge/sdk-edge/worker";

export type { Trigger };
export type Clock = () => number;

/** Compare-and-set attempts per change: every attempt that loses means another write on the same
 * budget committed, so this many losses in a row takes that many concurrent writers (50 parallel
 * records in the tests finish well inside it, thanks to the kit's jittered backoff). */
export const CAS_MAX_ATTEMPTS = 200;
/** State reads and writes of one budget: small local rows. */
export const STATE_TIMEOUT_MS = 10_000;
/** Rows one `state::list` page asks for. */
export const LIST_PAGE = 500;

export const budgetKey = (id: string): string => budgetState.budget(id).key;

/** The JSON a value becomes once stored: what the next compare-and-set must expect. */
const asStored = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

export const notFound = (id: string): IIIError => new IIIError("not_found", `budget ${id} does not exist (create it with budget::create)`);

/** What a change decides: the record to write (undefined = write nothing) and its answer. */
export interface Change<T> {
  next?: BudgetRecord;
  out: T;
}

export class BudgetStore {
  private readonly trigger: Trigger;
  private readonly clock: Clock;

  constructor(trigger: Trigger, clock: Clock) {
    this.trigger = trigger;
    this.clock = clock;
  }

  now(): number {
    return this.clock();
  }

  async readRaw(id: string): Promise<unknown> {
    return this.trigger({ function_id: "state::get", payload: { scope: BUDGETS_SCOPE, key: budgetKey(id) }, timeoutMs: STATE_TIMEOUT_MS });
  }

  /** The budget rolled over to now, without writing (reads never write: a closed window stays in
   * the row until the next change archives it). */
  async view(id: string): Promise<{ rec: BudgetRecord; now: number; stored: BudgetRecord }> {
    const stored = parseBudget(await this.readRaw(id), id);
    if (!stored) throw notFound(id);
    const now = this.clock();
    return { rec: rollTo(stored, now).rec, now, stored };
  }

  /** Write a new budget; false when the id is taken. */
  async create(rec: BudgetRecord): Promise<boolean> {
    const w = await compareAndSet(this.trigger, { scope: BUDGETS_SCOPE, key: budgetKey(rec.id) }, asStored(rec), null, {
      timeoutMs: STATE_TIMEOUT_MS,
    });
    return w.written;
  }

  /**
   * One atomic change of a budget: `decide` gets the record rolled over to now (a copy it may
   * change) and says what to write. Rollover alone is a change worth writing. Retried on conflict
   * (`decide` runs again on the fresh row, so it must not have effects of its own).
   */
  async change<T>(id: string, decide: (rec: BudgetRecord, now: number) => Change<T>, firstRead?: Promise<unknown>): Promise<T> {
    // What the last attempt read, decided and wrote: after casState returns, the winning one.
    let out!: T;
    let stored!: BudgetRecord;
    const w = await casState<unknown>(
      this.trigger,
      { scope: BUDGETS_SCOPE, key: budgetKey(id) },
      async (raw) => {
        const parsed = parseBudget(raw, id);
        if (!parsed) throw notFound(id);
        stored = parsed;
        const now = this.clock();
        const rolled = rollTo(stored, now);
        const decided = decide(rolled.rec, now);
        out = decided.out;
        const write = decided.next ?? (rolled.changed ? rolled.rec : undefined);
        if (!write) return undefined;
        write.updated_at = now;
        // The window this write replaces as `last_closed` is archived first (the same content as
        // when it closed, so a repeat is harmless): a crash between a close and its log write is
        // repaired by the next close at the latest.
        if (stored.last_closed && stored.last_closed.log_key !== write.last_closed?.log_key) await this.writeLog(stored.last_closed);
        return write;
      },
      {
        retries: CAS_MAX_ATTEMPTS - 1,
        timeoutMs: STATE_TIMEOUT_MS,
        ...(firstRead ? { firstRead } : {}),
        giveUp: () => new IIIError("budget_busy", `budget ${id}: ${CAS_MAX_ATTEMPTS} concurrent writes in a row won the race; try again`),
      },
    );
    const write = w.written ? (w.value as BudgetRecord) : undefined;
    if (write?.last_closed && write.last_closed.log_key !== stored.last_closed?.log_key) {
      // Only the write that closed the window gets here, with its final content.
      await this.writeLog(write.last_closed).catch((e: unknown) =>
        console.warn(`budget-tracker: spend log of ${id} (${write.last_closed?.log_key}) not written yet: ${String(e)}`),
      );
    }
    return out;
  }

  async delete(id: string): Promise<boolean> {
    const old = await this.trigger({
      function_id: "state::delete",
      payload: { scope: BUDGETS_SCOPE, key: budgetKey(id) },
      timeoutMs: STATE_TIMEOUT_MS,
    });
    return old !== undefined && old !== null;
  }

  async writeLog(entry: StoredLogEntry): Promise<void> {
    await this.trigger({
      function_id: "state::set",
      payload: { ...budgetState.spendLog(entry.budget_id, entry.log_key), value: entry },
      timeoutMs: STATE_TIMEOUT_MS,
    });
  }

  /** Spend-log entries in key order (= time order), a page at a time. */
  async logPage(id: string, offset: number, limit: number): Promise<StoredLogEntry[]> {
    const rows = await this.trigger<unknown, unknown>({
      function_id: "state::list",
      payload: { scope: budgetSpendLogScope(id), offset, limit },
      timeoutMs: STATE_TIMEOUT_MS,
    });
    return (Array.isArray(rows) ? rows : []).flatMap((r) => parseLogEntry(r) ?? []);
  }

  /** Budgets' rows, a page at a time (`state::list` values in key order). */
  async budgetPage(offset: number, limit: number): Promise<unknown[]> {
    const rows = await this.trigger<unknown, unknown>({
      function_id: "state::list",
      payload: { scope: BUDGETS_SCOPE, offset, limit },
      timeoutMs: STATE_TIMEOUT_MS,
    });
    return Array.isArray(rows) ? rows : [];
  }
}
