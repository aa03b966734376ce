// Engine state as workers use it: a read parsed with a schema, and compare-and-set over
// `state::update` with `expected` (atomic in the engine: of two writers that read the same value,
// exactly one wins and the other gets `state_conflict`). Nothing is held in memory between calls,
// so a worker using these runs as many copies as it likes.
import { errorCode, formatIssues, IIIError } from "@iii-edge/protocol";
import type { z } from "zod";
import type { Trigger } from "./worker.ts";

/** One value in engine state. */
export interface StateRef {
  scope: string;
  key: string;
}

/** A state call of these helpers: one local row, answered in milliseconds unless the engine is stuck. */
export const STATE_CALL_TIMEOUT_MS = 15_000;
/** Lost races retried by `casState` before it gives up: each loss means another write on the same
 * value committed in between, so this many in a row takes as many writers at once. */
export const CAS_RETRIES = 8;
/** Between attempts, a random wait up to min(BASE × 2^attempt, CAP): writers that collided spread
 * out instead of colliding again in lockstep. */
export const CAS_BACKOFF_BASE_MS = 1;
export const CAS_BACKOFF_CAP_MS = 20;

export interface StateCallOptions {
  timeoutMs?: number;
}

/** A stored value is not what its schema says: a broken record, reported, never silently reset. */
function unreadable(ref: StateRef, error: z.ZodError): IIIError {
  return new IIIError("invalid_state", `${ref.scope}/${ref.key} is unreadable: ${formatIssues(error)}`);
}

function getRaw(call: Trigger, ref: StateRef, opts: StateCallOptions): Promise<unknown> {
  return call<unknown, unknown>({
    function_id: "state::get",
    payload: { scope: ref.scope, key: ref.key },
    timeoutMs: opts.timeoutMs ?? STATE_CALL_TIMEOUT_MS,
  });
}

function parsed<T>(ref: StateRef, raw: unknown, schema: z.ZodType<T>): T | undefined {
  if (raw === undefined || raw === null) return undefined;
  const r = schema.safeParse(raw);
  if (!r.success) throw unreadable(ref, r.error);
  return r.data;
}

/** The value at `ref` parsed with `schema`; undefined when absent. A value that does not parse
 * throws `invalid_state`. */
export async function readState<T>(
  call: Trigger,
  ref: StateRef,
  schema: z.ZodType<T>,
  opts: StateCallOptions = {},
): Promise<T | undefined> {
  return parsed(ref, await getRaw(call, ref, opts), schema);
}

export interface CompareAndSetOptions extends StateCallOptions {
  /** More fields of the `state::update` payload, e.g. an `enqueue` stored in the write's transaction. */
  extra?: Record<string, unknown>;
}

/**
 * One compare-and-set: write `value` at `ref` if what is stored is still `expected` (undefined or
 * null: nothing). `written: false` when another write came first; any other failure throws.
 */
export async function compareAndSet(
  call: Trigger,
  ref: StateRef,
  value: unknown,
  expected: unknown,
  opts: CompareAndSetOptions = {},
): Promise<{ written: true; answer: unknown } | { written: false }> {
  try {
    const answer = await call<unknown, unknown>({
      function_id: "state::update",
      payload: { ...opts.extra, scope: ref.scope, key: ref.key, ops: [{ type: "set", path: "", value }], expected: expected ?? null },
      timeoutMs: opts.timeoutMs ?? STATE_CALL_TIMEOUT_MS,
    });
    return { written: true, answer };
  } catch (e) {
    if (errorCode(e) === "state_conflict") return { written: false };
    throw e;
  }
}

export interface CasOptions<T> extends StateCallOptions {
  /** The stored value is parsed with it before `update` sees it (unreadable: `invalid_state`). */
  schema?: z.ZodType<T>;
  /** Lost races retried (CAS_RETRIES); 0: one attempt. */
  retries?: number;
  /** The first attempt's read, when the caller fetched it alongside its other reads. */
  firstRead?: Promise<unknown>;
  /** What is thrown once every attempt lost (default: `state_conflict`). */
  giveUp?: (ref: StateRef, attempts: number) => Error;
  /** The backoff's wait (tests replace it). */
  sleep?: (ms: number) => Promise<void>;
}

export type CasOutcome<T> = { written: true; value: T } | { written: false; value: T | undefined };

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Read → `update(old)` → write if unchanged, retried on a lost race with `update` run again on the
 * fresh value (so it must have no effect it cannot repeat). `update` answers the next value, or
 * undefined to write nothing (`written: false`, `value`: what is stored). Old is undefined when
 * nothing is stored. Past `retries` lost races it throws (`giveUp`, or `state_conflict`).
 */
export async function casState<T = unknown>(
  call: Trigger,
  ref: StateRef,
  update: (old: T | undefined) => T | undefined | Promise<T | undefined>,
  opts: CasOptions<T> = {},
): Promise<CasOutcome<T>> {
  const attempts = (opts.retries ?? CAS_RETRIES) + 1;
  const sleep = opts.sleep ?? defaultSleep;
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) await sleep(Math.random() * Math.min(CAS_BACKOFF_CAP_MS, CAS_BACKOFF_BASE_MS * 2 ** attempt));
    const raw = attempt === 0 && opts.firstRead ? await opts.firstRead : await getRaw(call, ref, opts);
    const old = opts.schema ? parsed(ref, raw, opts.schema) : ((raw ?? undefined) as T | undefined);
    const next = await update(old);
    if (next === undefined) return { written: false, value: old };
    // The value as stored (JSON): what the caller holds and what the next write must expect.
    const stored = JSON.parse(JSON.stringify(next)) as T;
    const w = await compareAndSet(call, ref, stored, raw, opts);
    if (w.written) return { written: true, value: stored };
  }
  throw (
    opts.giveUp?.(ref, attempts) ??
    new IIIError("state_conflict", `${ref.scope}/${ref.key} kept changing under this write (${attempts} attempts); try again`)
  );
}
