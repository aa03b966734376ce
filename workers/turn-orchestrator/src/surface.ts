// iii's harness surface (docs/harness.md, "iii's harness surface"): `harness::send`, `harness::run`,
// `harness::stop` and `harness::status`, with iii's names, payloads and answers, beside our
// `run::*` / `turn::*`. Both drive the same turn: `harness::send` starts one through `run::start`'s
// own path (its claim is the compare-and-set that lets one turn per session through), and its
// turn id is the run id. A send while a turn runs takes the merge path (turn-end.ts says why a
// merged message is never dropped). `harness::spawn` is the sub-agents worker's.
import { formatIssues, IIIError, type CallerPrincipal } from "@iii-edge/protocol";
import {
  HARNESS_CHILDREN,
  HARNESS_RUN,
  HARNESS_SEND,
  HARNESS_STATUS,
  HARNESS_STOP,
  IDEMPOTENCY_TTL_MS,
  RUN_DEFAULT_TIMEOUT_MS,
  TERMINAL_TURN_STATUSES,
  harnessRunRequest,
  harnessRunResponse,
  harnessSendRequest,
  harnessSendResponse,
  harnessStatusRequest,
  harnessStatusResponse,
  harnessStopRequest,
  harnessStopResponse,
  idempotencyRecord,
  type HarnessRunResponse,
  type RunStartRequest,
  type IdempotencyRecord,
  type SendRequest,
  type SendResponse,
  type StatusResponse,
  type StopResponse,
} from "@iii-edge/protocol/harness";
import { withoutCallerId } from "@iii-edge/sdk-edge/client";
import { compareAndSet, type Tracer, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";
import { callRequired, errorCode, type Trigger } from "./calls.ts";
import { DEFAULT_MAX_TURNS } from "@iii-edge/protocol/harness";
import { SCOPE_IDEMPOTENCY, START_CLAIM_TTL_MS, STORAGE_TIMEOUT_MS } from "./constants.ts";
import { stopRun } from "./control.ts";
import { normaliseMessage } from "./messages.ts";
import { checkSession, OWNER_CHECKED } from "./owners.ts";
import { boundedKey, isTerminal } from "./record.ts";
import { loadRunRequest, parseRunRequest } from "./run-request.ts";
import { runStart } from "./run-start.ts";
import { casWriteValue, loadRecord, StateConflict, type Tx } from "./store.ts";
import { appendOne, ensureSession } from "./transcript.ts";
import { resultOf, turnStatusOf } from "./turn-events.ts";
import { setFreshTurnStarter } from "./turn-end.ts";

/** Rounds of the start-or-merge loop: each lost round means another send or the turn's end moved
 * the record in between; a handful settles any real contention. */
const SEND_ATTEMPTS = 8;
/** A repeated key whose first send is still in flight waits for its turn id this long at most
 * (a send is a few local writes). */
const IDEMPOTENCY_WAIT_MS = 10_000;
/** `harness::run` polls the record with growing pauses up to this (a turn takes seconds). */
const RUN_POLL_MAX_MS = 1_000;

export interface SurfaceDeps {
  newRunId: () => string;
  newSessionId: () => string;
  /** The clock of idempotency keys' 24 h (injected in tests). */
  now: () => number;
  tracer?: Tracer;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function parsed<T>(schema: z.ZodType<T>, data: unknown, what: string): T {
  // The engine's `_caller_*` stamps are not part of the payload (strict schemas would refuse them).
  const r = schema.safeParse(withoutCallerId(data));
  if (!r.success) throw new IIIError("invalid_arguments", `${what}: ${formatIssues(r.error, { all: true, root: "payload" })}`);
  return r.data;
}

// ------------------------------------------------------------------ idempotency keys

const idemRef = (key: string) => ({ scope: SCOPE_IDEMPOTENCY, key: boundedKey(key.replaceAll("/", "%2F")) });

type Claim = { claimed: true; raw: unknown } | { claimed: false; record: IdempotencyRecord };

/** Claim the key for this send (create-if-absent, or over a record older than the TTL); or the
 * record of the send that holds it. */
export async function claimKey(trigger: Trigger, key: string, sid: string, now: number): Promise<Claim> {
  const ref = idemRef(key);
  for (let attempt = 0; attempt < SEND_ATTEMPTS; attempt++) {
    const raw = (await callRequired<unknown>(trigger, "state::get", ref)) ?? null;
    const current = raw === null ? undefined : idempotencyRecord.safeParse(raw);
    const live = current?.success && now - current.data.ts < IDEMPOTENCY_TTL_MS;
    if (live) return { claimed: false, record: current.data };
    const mine: IdempotencyRecord = { session_id: sid, turn_id: null, ts: now };
    const w = await compareAndSet(trigger, ref, mine, raw, { timeoutMs: STORAGE_TIMEOUT_MS });
    if (w.written) return { claimed: true, raw: mine };
  }
  throw new IIIError("timeout", `idempotency_key ${key}: the key kept changing under this send`);
}

/** The first send's answer once it has its turn id. */
async function awaitFirst(trigger: Trigger, key: string, first: IdempotencyRecord, now: () => number): Promise<IdempotencyRecord> {
  const until = now() + IDEMPOTENCY_WAIT_MS;
  let rec = first;
  for (let pause = 20; rec.turn_id === null; pause = Math.min(pause * 2, 500)) {
    if (now() > until) throw new IIIError("timeout", `idempotency_key ${key}: the first send with this key has not finished`);
    await sleep(pause);
    const r = idempotencyRecord.safeParse(await callRequired<unknown>(trigger, "state::get", idemRef(key)));
    // Released (the first send failed): this one is not a repeat of anything; the caller retries.
    if (!r.success) throw new IIIError("timeout", `idempotency_key ${key}: the first send with this key failed; send again`);
    rec = r.data;
  }
  return rec;
}

// ------------------------------------------------------------------ harness::send

interface SendContext {
  trigger: Trigger;
  caller?: CallerPrincipal;
  deps: SurfaceDeps;
}

export async function send(ctx: SendContext, input: SendRequest): Promise<SendResponse> {
  const { trigger, deps } = ctx;
  const sid = input.session_id ?? deps.newSessionId();
  const key = input.idempotency_key;
  let claimRaw: unknown;
  if (key !== undefined) {
    const claim = await claimKey(trigger, key, sid, deps.now());
    if (!claim.claimed) {
      const first = await awaitFirst(trigger, key, claim.record, deps.now);
      // A repeat is answered only to someone who may use the session it names.
      await checkSession(trigger, ctx.caller, first.session_id);
      const out: SendResponse = { session_id: first.session_id, turn_id: first.turn_id!, accepted: true, deduplicated: true };
      return out;
    }
    claimRaw = claim.raw;
  }
  try {
    const answer = await startOrMerge(ctx, sid, input);
    if (key !== undefined) {
      const done: IdempotencyRecord = { session_id: sid, turn_id: answer.turn_id, ts: deps.now() };
      if (answer.merged) done.merged = true;
      await compareAndSet(trigger, idemRef(key), done, claimRaw, { timeoutMs: STORAGE_TIMEOUT_MS });
    }
    return answer;
  } catch (e) {
    // Give the key back, so a retry of a send that failed is not answered as a repeat of nothing.
    if (key !== undefined)
      await compareAndSet(trigger, idemRef(key), null, claimRaw, { timeoutMs: STORAGE_TIMEOUT_MS }).catch(() => undefined);
    throw e;
  }
}

/** The entry id of a merged send's message: from the key when there is one (a redelivery appends
 * nothing), else from the turn it joins and a fresh id. */
const mergedEntryId = (key: string | undefined, fresh: string): string =>
  boundedKey(key !== undefined ? `e_send_${key.replaceAll("/", "%2F")}` : `e_send_${fresh}`);

async function startOrMerge(ctx: SendContext, sid: string, input: SendRequest): Promise<SendResponse> {
  const { trigger, deps } = ctx;
  const message = normaliseMessage(input.message, Date.now());
  type Seed = RunStartRequest["messages"][number];
  const opts = input.options ?? {};
  const runStartDeps = { trigger, newRunId: deps.newRunId, tracer: deps.tracer, caller: ctx.caller };
  const start = async (messages: Seed[]): Promise<string | undefined> => {
    const turnId = deps.newRunId();
    const r = await runStart(runStartDeps, {
      session_id: sid,
      message_id: turnId,
      model: input.model,
      ...(input.provider ? { provider: input.provider } : {}),
      messages,
      ...(opts.max_turns ? { max_turns: opts.max_turns } : {}),
      ...(opts.system_prompt !== undefined ? { system_prompt: opts.system_prompt } : {}),
      ...(opts.fallback_models?.length ? { options: { fallback_models: opts.fallback_models } } : {}),
      ...(opts.output ? { output: opts.output } : {}),
    });
    return r.started ? turnId : undefined;
  };

  // The turn CAS: run::start's claim lets exactly one of two concurrent sends start the turn.
  const started = await start([message as unknown as Seed]);
  if (started) return { session_id: sid, turn_id: started, accepted: true };

  // Merge path: the message joins the transcript, then the live record learns of it.
  await ensureSession(trigger, sid);
  await appendOne(trigger, sid, { entry_id: mergedEntryId(input.idempotency_key, deps.newRunId()), message });
  for (let attempt = 0; attempt < SEND_ATTEMPTS; attempt++) {
    const loaded = await loadRecord(trigger, sid);
    if (!loaded || isTerminal(loaded.rec.state)) {
      // A start that claimed the session and has not written its record yet reads the transcript
      // after this append: the message is its.
      const { req } = await loadRunRequest(trigger, sid);
      if (req && req.run_id !== loaded?.rec.run_id && Date.now() - req.requested_at_ms < START_CLAIM_TTL_MS)
        return { session_id: sid, turn_id: req.run_id, accepted: true, merged: true };
      // The turn ended before the append was seen: a fresh turn for the message (merge double-check).
      const fresh = await start([]);
      if (fresh) return { session_id: sid, turn_id: fresh, accepted: true };
      continue;
    }
    const bumped = { ...(loaded.raw as Record<string, unknown>), merge_seq: (loaded.rec.merge_seq ?? 0) + 1 };
    try {
      await casWriteValue(trigger, sid, bumped, loaded.raw);
      return { session_id: sid, turn_id: loaded.rec.run_id, accepted: true, merged: true };
    } catch (e) {
      if (e instanceof StateConflict) continue;
      throw e;
    }
  }
  throw new IIIError("timeout", `harness::send on ${sid}: the session's turn kept changing under the send`);
}

/** A fresh turn on the transcript as it stands, with the settings of the run that just ended (the
 * loop's side of the merge double-check). */
export function freshTurnStarter(deps: SurfaceDeps): (tx: Tx) => Promise<string | undefined> {
  return async (tx) => {
    const { req } = await loadRunRequest(tx.trigger, tx.sid);
    if (!req) return undefined;
    const turnId = deps.newRunId();
    const r = await runStart(
      { trigger: tx.trigger, newRunId: deps.newRunId, tracer: deps.tracer },
      {
        session_id: tx.sid,
        message_id: turnId,
        model: req.model,
        provider: req.provider,
        messages: [],
        ...(req.max_turns ? { max_turns: req.max_turns } : {}),
        ...(req.fallback_models?.length ? { options: { fallback_models: req.fallback_models } } : {}),
        ...(req.output ? { output: req.output } : {}),
      },
    );
    return r.started ? turnId : undefined;
  };
}

// ------------------------------------------------------------------ harness::status / stop / run

const childRunLink = z.looseObject({ run_id: z.string(), parent: z.looseObject({ function_call_id: z.string().optional() }).optional() });
const childrenAnswer = z.looseObject({
  children: z.array(z.looseObject({ child_session_id: z.string(), state: z.string().nullable() })),
});

/** The live children of a session, from the sub-agents worker (none when it is not installed). */
async function liveChildren(trigger: Trigger, sid: string): Promise<NonNullable<StatusResponse>["children"]> {
  let answer: unknown;
  try {
    answer = await trigger({ function_id: HARNESS_CHILDREN, payload: { parent_session_id: sid }, timeoutMs: STORAGE_TIMEOUT_MS });
  } catch (e) {
    if (errorCode(e) === "function_not_found") return [];
    throw e;
  }
  const r = childrenAnswer.safeParse(answer);
  if (!r.success) return [];
  const live = r.data.children.filter((c) => c.state !== "stopped" && c.state !== "failed");
  return Promise.all(
    live.map(async (c) => {
      const link = childRunLink.safeParse((await loadRunRequest(trigger, c.child_session_id)).raw);
      return {
        function_call_id: link.success ? (link.data.parent?.function_call_id ?? "") : "",
        session_id: c.child_session_id,
        turn_id: link.success ? link.data.run_id : "",
      };
    }),
  );
}

export async function status(trigger: Trigger, sid: string): Promise<StatusResponse> {
  const loaded = await loadRecord(trigger, sid);
  if (!loaded) return null;
  const rec = loaded.rec;
  const { raw } = await loadRunRequest(trigger, sid);
  const depth = z.looseObject({ parent: z.looseObject({ depth: z.number().int() }) }).safeParse(raw);
  const pending = new Set<string>();
  for (const [cid, c] of Object.entries(rec.work?.calls ?? {})) if (c === "pending") pending.add(cid);
  for (const a of rec.awaiting_approval ?? []) pending.add(a.function_call_id);
  const st = turnStatusOf(rec);
  const out: NonNullable<StatusResponse> = {
    session_id: sid,
    turn_id: rec.run_id || null,
    status: st,
    step: rec.step,
    turn_count: rec.turn_count,
    max_turns: rec.max_turns ?? parseRunRequest(raw)?.max_turns ?? DEFAULT_MAX_TURNS,
    depth: depth.success ? depth.data.parent.depth : 0,
    pending_function_calls: [...pending],
    children: isTerminal(rec.state) ? [] : await liveChildren(trigger, sid),
  };
  if (TERMINAL_TURN_STATUSES.includes(st)) Object.assign(out, resultOf(rec));
  if (st === "failed" && rec.error) out.reason = rec.error.message;
  return out;
}

export async function stop(trigger: Trigger, sid: string, turnId: string | undefined, tracer?: Tracer): Promise<StopResponse> {
  if (turnId !== undefined) {
    const loaded = await loadRecord(trigger, sid);
    if (!loaded || loaded.rec.run_id !== turnId) return { stopping: false };
  }
  const r = await stopRun(trigger, sid, tracer);
  return { stopping: r.stopping };
}

/** `harness::run`: send, then wait for the turn it started or joined to be terminal. */
async function run(ctx: SendContext, input: z.infer<typeof harnessRunRequest>): Promise<HarnessRunResponse> {
  const { timeout_ms, ...sendInput } = input;
  const sent = await send(ctx, sendInput);
  const deadline = Date.now() + (timeout_ms ?? RUN_DEFAULT_TIMEOUT_MS);
  const answer = (s: NonNullable<StatusResponse> | null, timedOut: boolean): HarnessRunResponse => {
    const out: HarnessRunResponse = { session_id: sent.session_id, turn_id: sent.turn_id, status: s?.status ?? "running" };
    if (sent.merged) out.merged = true;
    if (sent.deduplicated) out.deduplicated = true;
    if (s?.result !== undefined) out.result = s.result;
    if (s?.result_error !== undefined) out.result_error = s.result_error;
    if (s?.reason !== undefined) out.reason = s.reason;
    if (timedOut) out.timed_out = true;
    return out;
  };
  let last: StatusResponse = null;
  for (let pause = 50; ; pause = Math.min(pause * 2, RUN_POLL_MAX_MS)) {
    last = await status(ctx.trigger, sent.session_id);
    // The turn is over: terminal, or a later turn replaced it on the session.
    if (last && (last.turn_id !== sent.turn_id || TERMINAL_TURN_STATUSES.includes(last.status)))
      return last.turn_id === sent.turn_id ? answer(last, false) : answer({ ...last, status: "completed" }, false);
    if (Date.now() + pause > deadline) return answer(last, true);
    await sleep(pause);
  }
}

// ------------------------------------------------------------------ registration

const formatOf = (schema: z.ZodType, io: "input" | "output") => z.toJSONSchema(schema, { io, unrepresentable: "any" });

export function registerHarnessSurface(iii: WorkerSurface, deps: SurfaceDeps): void {
  setFreshTurnStarter(freshTurnStarter(deps));
  const sendCtx = (ctx: { trigger: unknown; caller?: CallerPrincipal }): SendContext => ({
    trigger: ctx.trigger as Trigger,
    caller: ctx.caller,
    deps,
  });
  iii.registerFunction(HARNESS_SEND, (data: unknown, ctx) => send(sendCtx(ctx), parsed(harnessSendRequest, data, HARNESS_SEND)), {
    description:
      "iii's harness::send: start a turn on a session, or fold the message into the one running ({session_id?, message, model, provider?, idempotency_key?, options?} → {session_id, turn_id, accepted, merged?, deduplicated?})",
    request_format: formatOf(harnessSendRequest, "input"),
    response_format: formatOf(harnessSendResponse, "output"),
    metadata: OWNER_CHECKED,
  });
  iii.registerFunction(HARNESS_RUN, (data: unknown, ctx) => run(sendCtx(ctx), parsed(harnessRunRequest, data, HARNESS_RUN)), {
    description:
      "harness::send, then wait for the turn's terminal status: {…SendRequest, timeout_ms?} → {session_id, turn_id, status, result?, result_error?}",
    request_format: formatOf(harnessRunRequest, "input"),
    response_format: formatOf(harnessRunResponse, "output"),
    metadata: OWNER_CHECKED,
  });
  iii.registerFunction(
    HARNESS_STATUS,
    async (data: unknown, ctx) => {
      const { session_id } = parsed(harnessStatusRequest, data, HARNESS_STATUS);
      await checkSession(ctx.trigger as Trigger, ctx.caller, session_id);
      return status(ctx.trigger as Trigger, session_id);
    },
    {
      description:
        "iii's harness::status: {session_id} → {session_id, turn_id, status, step, turn_count, max_turns, depth, pending_function_calls, children, result?, result_error?} or null",
      request_format: formatOf(harnessStatusRequest, "input"),
      response_format: formatOf(harnessStatusResponse, "output"),
      metadata: OWNER_CHECKED,
    },
  );
  iii.registerFunction(
    HARNESS_STOP,
    async (data: unknown, ctx) => {
      const { session_id, turn_id } = parsed(harnessStopRequest, data, HARNESS_STOP);
      await checkSession(ctx.trigger as Trigger, ctx.caller, session_id);
      return stop(ctx.trigger as Trigger, session_id, turn_id, deps.tracer);
    },
    {
      description: "iii's harness::stop: {session_id, turn_id?} → {stopping} (cascades to spawned children)",
      request_format: formatOf(harnessStopRequest, "input"),
      response_format: formatOf(harnessStopResponse, "output"),
      metadata: OWNER_CHECKED,
    },
  );
}
