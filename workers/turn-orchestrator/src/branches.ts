// Runs on a session's branches (docs/harness-contracts.md §5.2 "Resume", §5.3 fork and set-active-leaf):
// resume a stopped or failed session, re-run from an earlier user message with an edit (time
// travel), and fork-then-run. Each starts its run through run::start's own path (busy guard, claim,
// seeds, the record whose save wakes provisioning); the tree itself is session storage's
// (`session-tree::*`).
import { CALLER_PRINCIPAL_KEY, IIIError, formatIssues, responseFormat } from "@iii-edge/protocol";
import { runOptionsField, type RunOptions } from "@iii-edge/protocol/harness";
import {
  runForkRequest,
  runForkResponse,
  runRerunFromRequest,
  runRerunResponse,
  runResumeRequest,
  runResumeResponse,
  runStartRequest,
  type AgentMessage,
  type RunForkRequest,
  type RunForkResponse,
  type RunRerunFromRequest,
  type RunRerunResponse,
  type RunResumeRequest,
  type RunResumeResponse,
  type RunStartRequest,
  type SessionCopyResponse,
  type SessionEntryView,
  type SessionInfo,
} from "@iii-edge/protocol/harness";
import { tracerOf, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { callBestEffort, callRequired, errorCode, invalid, type Trigger } from "./calls.ts";
import { START_CLAIM_TTL_MS } from "./constants.ts";
import { normaliseMessage } from "./messages.ts";
import { assistantEntryId, canonicalJson, isTerminal, seedEntryId } from "./record.ts";
import { loadRunRequest, type StoredRunRequest } from "./run-request.ts";
import { checkSession, ownCopy, OWNER_CHECKED } from "./owners.ts";
import { runStart, type StartDeps } from "./run-start.ts";
import { loadRecord, type Loaded } from "./store.ts";

/** Fork / clone hops a resumed copy follows back to find the run settings it inherits (a copy of a
 * copy of …); past this it must name its model. */
export const MAX_ORIGIN_HOPS = 8;
/** Hex digits of a derived run id's digest (96 bits: two requests never share a run id). */
const RUN_ID_DIGEST_HEX = 24;

type Settings = Omit<RunResumeRequest, "session_id" | "message" | "message_id">;

const utf8 = new TextEncoder();

/** A run id derived from what identifies the request: the same request, the same run. */
async function derivedRunId(prefix: string, parts: readonly string[]): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", utf8.encode(JSON.stringify(parts))));
  return `${prefix}_${Array.from(digest, (b) => b.toString(16).padStart(2, "0"))
    .join("")
    .slice(0, RUN_ID_DIGEST_HEX)}`;
}

/** What makes two messages the same request: everything but the time it was sent. */
const messageKey = (m: AgentMessage | undefined): string => (m === undefined ? "" : canonicalJson({ ...m, timestamp: null }));

async function getSession(trigger: Trigger, sid: string): Promise<SessionInfo | null> {
  const r = await callRequired<SessionInfo | null | undefined>(trigger, "session-tree::get", { session_id: sid });
  return r ?? null; // a null result arrives as no result
}

async function getEntry(trigger: Trigger, sid: string, entryId: string): Promise<SessionEntryView | null> {
  const r = await callRequired<SessionEntryView | null | undefined>(trigger, "session-tree::get_entry", {
    session_id: sid,
    entry_id: entryId,
  });
  return r ?? null;
}

/** Entries run `runId` leaves behind (its first seed, its first answer): it ran in this session. */
async function ranBefore(trigger: Trigger, sid: string, runId: string): Promise<boolean> {
  const found = await Promise.all([getEntry(trigger, sid, seedEntryId(runId, 0)), getEntry(trigger, sid, assistantEntryId(runId, 1))]);
  return found.some((e) => e !== null);
}

/** The settings of the session's last run, else of the session it was copied from (and so on). */
async function inheritedSettings(trigger: Trigger, sid: string, info: SessionInfo): Promise<StoredRunRequest | undefined> {
  let current = sid;
  let origin = info.origin;
  for (let hop = 0; ; hop++) {
    const { req } = await loadRunRequest(trigger, current);
    if (req) return req;
    if (!origin || hop >= MAX_ORIGIN_HOPS) return undefined;
    current = origin.source_session_id;
    origin = (await getSession(trigger, current))?.origin;
  }
}

/** Run id prefixes of derived runs: resume, re-run, a fork's first run. */
const RESUME_PREFIX = "rs";
const RERUN_PREFIX = "rr";
const FORK_RUN_PREFIX = "rf";

/**
 * Whether the session's latest run (live or ended) was started by this same request, derived
 * (`prefix`): its first seed is `message` (none for a resume without one) under `parent` (re-run).
 * That is a repeat — a double click, a retried POST — and starts nothing. A failed run is the
 * exception: asking again after a failure is a retry.
 */
async function latestRunAnswers(
  trigger: Trigger,
  sid: string,
  loaded: Loaded | undefined,
  prefix: string,
  message: AgentMessage | undefined,
  parent?: string | null,
): Promise<string | undefined> {
  const rec = loaded?.rec;
  if (!rec || rec.state === "failed" || !rec.run_id.startsWith(`${prefix}_`)) return undefined;
  const seed = await getEntry(trigger, sid, seedEntryId(rec.run_id, 0));
  if (message === undefined) return seed === null ? rec.run_id : undefined;
  if (!seed?.message || messageKey(normaliseMessage(seed.message)) !== messageKey(message)) return undefined;
  return parent === undefined || seed.parent_id === parent ? rec.run_id : undefined;
}

/** The run a start claimed the session for moments ago, its record not written yet (run::start's
 * own rule: a claim younger than START_CLAIM_TTL_MS without its record is a start in progress). */
async function claimInFlight(trigger: Trigger, sid: string, loaded: Loaded | undefined): Promise<string | undefined> {
  const { req } = await loadRunRequest(trigger, sid);
  return req && req.run_id !== loaded?.rec.run_id && Date.now() - req.requested_at_ms < START_CLAIM_TTL_MS ? req.run_id : undefined;
}

/** Not free for a new run `runId`: a live record or another start in progress is busy; this very
 * run claimed first (a racing repeat) is already_started. */
async function refusal(trigger: Trigger, sid: string, loaded: Loaded | undefined, runId: string): Promise<RunResumeResponse | undefined> {
  if (loaded && !isTerminal(loaded.rec.state)) return busy(sid);
  const claim = await claimInFlight(trigger, sid, loaded);
  if (claim === undefined) return undefined;
  return claim === runId ? already(sid, runId) : busy(sid);
}

const busy = (session_id: string): RunResumeResponse => ({ session_id, started: false, reason: "session_busy" });
const already = (session_id: string, run_id: string): RunResumeResponse => ({
  session_id,
  run_id,
  started: false,
  reason: "already_started",
});

const runStartWithOptions = runStartRequest.extend(runOptionsField);

/**
 * The run::start request of a run on an existing transcript: the settings given, else inherited.
 * The system prompt is only carried when given: the stored one is provisioning's built prompt
 * (catalog and sandbox of that run), so the new run gets a fresh one.
 */
async function startRequest(
  trigger: Trigger,
  sid: string,
  info: SessionInfo,
  runId: string,
  settings: Settings,
  seeds: AgentMessage[],
): Promise<RunStartRequest & { options?: RunOptions }> {
  const base = await inheritedSettings(trigger, sid, info);
  const model = settings.model ?? base?.model;
  if (!model) throw invalid(`session ${sid} has no earlier run to take the model from: give model (and provider)`);
  const request: Record<string, unknown> = {
    session_id: sid,
    message_id: runId,
    model,
    // A new model without a provider: run::start infers it from the model's name.
    provider: settings.provider ?? (settings.model === undefined ? base?.provider : undefined),
    mode: settings.mode ?? base?.mode ?? undefined,
    messages: seeds,
    max_turns: settings.max_turns ?? base?.max_turns,
    system_prompt: settings.system_prompt,
    skills: settings.skills ?? base?.skills,
    isolation: settings.isolation ?? base?.isolation,
    budget_id: settings.budget_id ?? base?.budget_id,
    // The fallbacks were chosen for the earlier run's model: they come along only with it.
    options: settings.model === undefined && base?.fallback_models ? { fallback_models: base.fallback_models } : undefined,
  };
  for (const k of Object.keys(request)) if (request[k] === undefined) delete request[k];
  const parsed = runStartWithOptions.safeParse(request);
  if (!parsed.success) throw invalid(`the run for ${sid}: ${formatIssues(parsed.error, { all: true })}`);
  return parsed.data;
}

/** run::start's answer as this request's: a refusal because this very run claimed first is a repeat. */
async function settle(trigger: Trigger, sid: string, runId: string, started: { started: boolean }): Promise<RunResumeResponse> {
  if (started.started) return { session_id: sid, run_id: runId, started: true };
  const { req } = await loadRunRequest(trigger, sid);
  return req?.run_id === runId ? already(sid, runId) : busy(sid);
}

/**
 * `run::resume`: a new run on the session's transcript as it stands (a stopped or failed run, or a
 * copy that never ran), after the optional `message`. Idempotent per request: with `message_id`
 * (the run's id) any repeat is `already_started`; without one, a repeat of the request the latest
 * run answered is (see latestRunAnswers), and two racing repeats derive the same run id.
 */
export async function resumeRun(deps: StartDeps, input: RunResumeRequest, stableRunId?: string): Promise<RunResumeResponse> {
  const { trigger } = deps;
  const sid = input.session_id;
  await checkSession(trigger, deps.caller, sid);
  const [loaded, info] = await Promise.all([loadRecord(trigger, sid), getSession(trigger, sid)]);
  if (!info) throw new IIIError("not_found", `session ${sid} does not exist`);
  const message = input.message === undefined ? undefined : normaliseMessage(input.message);
  const keyed = input.message_id ?? stableRunId;
  if (keyed === undefined) {
    const repeat = await latestRunAnswers(trigger, sid, loaded, RESUME_PREFIX, message);
    if (repeat !== undefined) return already(sid, repeat);
  }
  const runId =
    keyed ??
    (await derivedRunId(RESUME_PREFIX, [
      sid,
      loaded?.rec.run_id ?? "",
      String(loaded?.rec.step ?? 0),
      info.leaf_id ?? "",
      messageKey(message),
    ]));
  if (loaded?.rec.run_id === runId) return already(sid, runId);
  const refused = await refusal(trigger, sid, loaded, runId);
  if (refused) return refused;
  // A named run that ran here before (and others since): never run it twice — its entry ids are taken.
  if (keyed !== undefined && (await ranBefore(trigger, sid, runId))) return already(sid, runId);
  if (!message && info.leaf_id === null) throw invalid(`session ${sid} has nothing to resume: its transcript is empty (send a message)`);
  const request = await startRequest(trigger, sid, info, runId, input, message ? [message] : []);
  return settle(trigger, sid, runId, await runStart(deps, request));
}

/**
 * `run::rerun_from` (time travel): the user message `entry_id` (edited, or as it was) is asked again
 * on a new branch under that entry's parent, and a run answers it. The old branch stays as it was
 * (readable with `branch_leaf`, listed by `session-tree::branches`).
 */
export async function rerunFrom(deps: StartDeps, input: RunRerunFromRequest): Promise<RunRerunResponse> {
  const { trigger } = deps;
  const sid = input.session_id;
  await checkSession(trigger, deps.caller, sid);
  const [loaded, info, entry] = await Promise.all([
    loadRecord(trigger, sid),
    getSession(trigger, sid),
    getEntry(trigger, sid, input.entry_id),
  ]);
  if (!info) throw new IIIError("not_found", `session ${sid} does not exist`);
  if (!entry) throw new IIIError("not_found", `entry ${input.entry_id} is not in session ${sid}`);
  if (entry.kind !== "message" || entry.message?.role !== "user")
    throw invalid(`entry ${input.entry_id} is not a user message: re-run from the user message whose answer should change`);
  const message = normaliseMessage(input.message ?? { ...entry.message, timestamp: undefined });
  if (message.role !== "user") throw invalid("message must be a user message (or text)");
  if (input.message_id === undefined) {
    const repeat = await latestRunAnswers(trigger, sid, loaded, RERUN_PREFIX, message, entry.parent_id);
    if (repeat !== undefined) return { ...already(sid, repeat), entry_id: seedEntryId(repeat, 0) };
  }
  const runId =
    input.message_id ??
    (await derivedRunId(RERUN_PREFIX, [sid, input.entry_id, loaded?.rec.run_id ?? "", String(loaded?.rec.step ?? 0), messageKey(message)]));
  if (loaded?.rec.run_id === runId) return { ...already(sid, runId), entry_id: seedEntryId(runId, 0) };
  const refused = await refusal(trigger, sid, loaded, runId);
  if (refused) return refused;

  // The edited message is the run's first seed. If it is already there, this run was asked before:
  // done if it got an answer, else (a start that died after seeding) it starts again on that seed.
  const seedId = seedEntryId(runId, 0);
  const seeded = await getEntry(trigger, sid, seedId);
  if (seeded && seeded.parent_id !== entry.parent_id) throw invalid(`message_id ${runId} already names another message of session ${sid}`);
  if (seeded && (await getEntry(trigger, sid, assistantEntryId(runId, 1)))) return { ...already(sid, runId), entry_id: seedId };
  const target = seeded ? seedId : entry.parent_id;
  const previous = info.leaf_id;
  // The leaf moved since it was read: a writer is at work — or a racing repeat of this request.
  if (!(await setLeaf(trigger, sid, target, previous)))
    return (await claimInFlight(trigger, sid, loaded)) === runId ? already(sid, runId) : busy(sid);
  let started: { started: boolean };
  try {
    started = await runStart(deps, await startRequest(trigger, sid, info, runId, input, seeded ? [] : [message]));
  } catch (e) {
    await restoreLeaf(trigger, sid, previous, target);
    throw e;
  }
  if (!started.started) await restoreLeaf(trigger, sid, previous, target);
  return { ...(await settle(trigger, sid, runId, started)), entry_id: seedId, parent_id: entry.parent_id, previous_leaf_id: previous };
}

/** Move the active leaf from `expected` to `target`; false when someone moved it first (a writer
 * is at work on the session: busy). */
async function setLeaf(trigger: Trigger, sid: string, target: string | null, expected: string | null): Promise<boolean> {
  try {
    await callRequired(trigger, "session-tree::set_active_leaf", { session_id: sid, entry_id: target, expected_leaf_id: expected });
    return true;
  } catch (e) {
    if (errorCode(e) === "leaf_conflict") return false;
    throw e;
  }
}

/** Give the branch back after a start that did not happen, unless something was appended since. */
async function restoreLeaf(trigger: Trigger, sid: string, previous: string | null, target: string | null): Promise<void> {
  if (previous === target) return;
  await callBestEffort(trigger, "session-tree::set_active_leaf", { session_id: sid, entry_id: previous, expected_leaf_id: target });
}

/**
 * `run::fork`: `session-tree::fork` (a repeat of the request answers the same copy), then, when a
 * `message` is given or `run: true`, the copy's first run — named after the copy and the message, so
 * a repeated fork never starts it twice.
 */
export async function forkRun(deps: StartDeps, input: RunForkRequest): Promise<RunForkResponse> {
  const { session_id, entry_id, new_session_id, request_key, display_name, run, message, message_id, ...settings } = input;
  const payload: Record<string, unknown> = { source_session_id: session_id, from_entry_id: entry_id };
  if (new_session_id !== undefined) payload.new_session_id = new_session_id;
  if (request_key !== undefined) payload.request_key = request_key;
  if (display_name !== undefined) payload.display_name = display_name;
  await checkSession(deps.trigger, deps.caller, session_id);
  // Storage records the copy's owner from the principal it is told (the caller, as it asked).
  if (deps.caller) payload[CALLER_PRINCIPAL_KEY] = deps.caller;
  const fork = await callRequired<SessionCopyResponse>(deps.trigger, "session-tree::fork", payload);
  await ownCopy(deps.trigger, deps.caller, session_id, fork.session_id);
  if (!(run ?? message !== undefined)) return fork;
  const first = message === undefined ? undefined : normaliseMessage(message);
  const stable = message_id ?? (await derivedRunId(FORK_RUN_PREFIX, [fork.session_id, messageKey(first)]));
  const resumed = await resumeRun(deps, { session_id: fork.session_id, message, ...settings }, stable);
  return { ...fork, run: resumed };
}

/** Register run::resume, run::rerun_from and run::fork. */
export function registerBranchFunctions(iii: WorkerSurface, newRunId: () => string): void {
  const tracer = tracerOf(iii);
  const deps = (ctx: { trigger: unknown; caller?: StartDeps["caller"] }): StartDeps => ({
    trigger: ctx.trigger as Trigger,
    newRunId,
    tracer,
    caller: ctx.caller,
  });
  iii.registerFunction("run::resume", (data: RunResumeRequest, ctx) => resumeRun(deps(ctx), data), {
    description:
      "Resume a stopped or failed session (or a fork that never ran): a new run on its transcript, after an optional message → {session_id, run_id, started} (started:false with session_busy or already_started).",
    input: runResumeRequest,
    response_format: responseFormat(runResumeResponse),
    metadata: OWNER_CHECKED,
  });
  iii.registerFunction("run::rerun_from", (data: RunRerunFromRequest, ctx) => rerunFrom(deps(ctx), data), {
    description:
      "Time travel: re-ask the user message entry_id (edited by message) on a new branch under its parent and run; the old branch stays → {session_id, run_id, started, entry_id, parent_id}.",
    input: runRerunFromRequest,
    response_format: responseFormat(runRerunResponse),
    metadata: OWNER_CHECKED,
  });
  iii.registerFunction("run::fork", (data: RunForkRequest, ctx) => forkRun(deps(ctx), data), {
    description:
      "Fork a session at entry_id (session-tree::fork) and, with a message or run:true, run on the fork → {session_id, leaf_id, created, run?}.",
    input: runForkRequest,
    response_format: responseFormat(runForkResponse),
    metadata: OWNER_CHECKED,
  });
}
