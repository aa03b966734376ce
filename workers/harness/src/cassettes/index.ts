// The cassettes worker (docs/cassettes.md): export a finished turn as a cassette, and replay one
// through the real orchestrator with no provider and no side effects. It uses other workers only by
// function id: `run::status`, `run::request`, `session-tree::messages` to export; `run::start` with
// a `replay_id` to replay, after which the orchestrator asks it for each model step
// (`provider::cassette::stream`), each call's policy answer (`cassette::check_permissions`, under the
// replay's policy override) and each call's result or recorded approval (`cassette::answer`).
import { errorCode, IIIError, isRecord, responseFormat, formatIssues } from "@iii-edge/protocol";
import {
  CASSETTE_PROVIDER,
  CASSETTE_VERSION,
  MAX_CASSETTE_STEPS,
  REPLAY_SESSION_PREFIX,
  REPLAY_TIMEOUT_MS,
  cassetteExportRequest,
  cassetteReplayRequest,
  cassetteReplayResponse,
  cassetteSchema,
  replayAnswerRequest,
  replayAnswerResponse,
  replayCheckRequest,
  type Cassette,
  type CassetteReplayResponse,
  type ReplayAnswer,
  type ReplayOverrides,
  type RunStatus,
  type RunRequestView,
} from "@iii-edge/protocol/harness";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";
import { actingFor } from "../index.ts";
import { diffTurns, reportOf } from "./diff.ts";
import { streamStep } from "./provider.ts";
import { textOf, turnOf, type StoredEntry } from "./turn.ts";

type Ctx = InvocationContext;

/** The worker's own scope: one record per replay in flight, deleted when the replay answers. */
export const SCOPE_REPLAYS = "cassette_replays";
/** State reads and run::* calls: local engine calls. */
export const QUERY_TIMEOUT_MS = 10_000;
/** Transcript pages read for one export (of session-tree::messages' largest page). */
export const TRANSCRIPT_PAGE_SIZE = 1_000;
export const TRANSCRIPT_MAX_PAGES = 50;
/** How often a replay looks whether its run has ended: a replay is a few queue hops per step. */
export const REPLAY_POLL_MS = 50;

/** A replay in flight (`cassette_replays/<replay id>`). */
export const replayRecordSchema = z.object({
  session_id: z.string(),
  cassette: cassetteSchema,
  overrides: z.looseObject({ policy: z.string().optional(), model: z.string().optional() }).optional(),
  started_at_ms: z.number(),
});
export type ReplayRecord = z.infer<typeof replayRecordSchema>;

export interface CassettesConfig {
  newReplayId?: () => string;
  now?: () => number;
}

const TERMINAL = new Set(["stopped", "failed"]);

async function readTranscript(ctx: Ctx, sid: string): Promise<StoredEntry[]> {
  const out: StoredEntry[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < TRANSCRIPT_MAX_PAGES; page++) {
    const payload: Record<string, unknown> = { session_id: sid, limit: TRANSCRIPT_PAGE_SIZE };
    if (cursor) payload.cursor = cursor;
    const r = await ctx.trigger<unknown, { messages?: unknown; next_cursor?: unknown }>({
      function_id: "session-tree::messages",
      payload,
      timeoutMs: QUERY_TIMEOUT_MS,
    });
    const messages = Array.isArray(r?.messages) ? r.messages : [];
    for (const m of messages)
      if (isRecord(m) && isRecord(m.message))
        out.push({ entry_id: String(m.entry_id ?? ""), message: m.message as unknown as StoredEntry["message"] });
    cursor = typeof r?.next_cursor === "string" && r.next_cursor !== "" ? r.next_cursor : undefined;
    if (!cursor || messages.length === 0) return out;
  }
  throw new IIIError("value_too_large", `the transcript of ${sid} is longer than ${TRANSCRIPT_MAX_PAGES * TRANSCRIPT_PAGE_SIZE} entries`);
}

const runStatus = (ctx: Ctx, sid: string) =>
  ctx.trigger<unknown, RunStatus | null>({ function_id: "run::status", payload: { session_id: sid }, timeoutMs: QUERY_TIMEOUT_MS });

/** `cassette::export {session_id, turn_id}`: the finished turn as a cassette. */
export async function exportCassette(ctx: Ctx, data: unknown, now: () => number): Promise<Cassette> {
  const req = cassetteExportRequest.safeParse(data);
  if (!req.success) throw new IIIError("invalid_arguments", `cassette::export: ${formatIssues(req.error)}`);
  const { session_id: sid, turn_id: turnId } = req.data;
  // A session that does not exist and one that is not the caller's read the same (null, forbidden).
  const status = await runStatus(ctx, sid).catch((e: unknown) => {
    if (errorCode(e) === "forbidden") return null;
    throw e;
  });
  if (!status) throw new IIIError("turn_not_found", `no turn ${turnId} in session ${sid}`);
  const current = status.run_id === turnId;
  if (current && !TERMINAL.has(status.state))
    throw new IIIError("turn_running", `turn ${turnId} of session ${sid} is ${status.state}: export it once it has finished`);
  const turn = turnOf(await readTranscript(ctx, sid), turnId);
  if (!turn || turn.steps.length === 0) throw new IIIError("turn_not_found", `no turn ${turnId} in session ${sid}`);
  if (turn.steps.length > MAX_CASSETTE_STEPS)
    throw new IIIError("value_too_large", `turn ${turnId} has ${turn.steps.length} model steps; a cassette holds ${MAX_CASSETTE_STEPS}`);
  const first = turn.steps[0]!.message;
  let request: Cassette["request"] = { provider: first.provider || "openai", model: first.model || "unknown", mode: null };
  if (current) {
    const r = await ctx.trigger<unknown, RunRequestView | null>({
      function_id: "run::request",
      payload: { session_id: sid },
      timeoutMs: QUERY_TIMEOUT_MS,
    });
    if (r) request = { provider: r.provider, model: r.model, mode: r.mode ?? null, ...(r.max_turns ? { max_turns: r.max_turns } : {}) };
  }
  const permissions = await permissionsOf(ctx, sid);
  return {
    version: CASSETTE_VERSION,
    exported_at_ms: now(),
    source: { session_id: sid, turn_id: turnId },
    request,
    ...(permissions ? { permissions } : {}),
    input: turn.input as unknown as Cassette["input"],
    steps: turn.steps,
    final_state: current && status.state === "failed" ? "failed" : "stopped",
    final_text: textOf(turn.steps.at(-1)!.message),
  };
}

/** The session's own permission settings (none when it has only the defaults, or approval-gate is
 * not deployed: the replay then runs under the defaults, as the session did). */
async function permissionsOf(ctx: Ctx, sid: string): Promise<Cassette["permissions"]> {
  const r = await ctx
    .trigger<unknown, { settings?: NonNullable<Cassette["permissions"]>; source?: string }>({
      function_id: "approval::get-settings",
      payload: { session_id: sid },
      timeoutMs: QUERY_TIMEOUT_MS,
    })
    .catch((e: unknown) => {
      if (errorCode(e) === "function_not_found") return null;
      throw e;
    });
  if (r?.source !== "stored" || !r.settings) return undefined;
  const { mode, always_allow, approved_always } = r.settings;
  return { mode, always_allow, approved_always };
}

/** Give the scratch session the recorded session's permission settings before its turn starts. */
async function applyPermissions(ctx: Ctx, sid: string, permissions: NonNullable<Cassette["permissions"]>): Promise<void> {
  const call = (function_id: string, payload: Record<string, unknown>) =>
    ctx.trigger({ function_id, payload: { session_id: sid, ...payload }, timeoutMs: QUERY_TIMEOUT_MS });
  await call("approval::set-mode", { mode: permissions.mode });
  for (const e of permissions.always_allow) await call("approval::add-always-allow", { function_id: e.function_id });
  for (const e of permissions.approved_always) await call("approval::approve-always", { function_id: e.function_id });
}

async function loadReplay(ctx: Ctx, replayId: string, sid: string): Promise<ReplayRecord> {
  const raw = await ctx.trigger({
    function_id: "state::get",
    payload: { scope: SCOPE_REPLAYS, key: replayId },
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  const rec = replayRecordSchema.safeParse(raw);
  // Another session naming this replay learns nothing about it.
  if (!rec.success || rec.data.session_id !== sid) throw new IIIError("not_found", `no replay ${replayId} runs in session ${sid}`);
  return rec.data;
}

/** `cassette::replay {cassette, overrides?}`: run the turn again in a scratch session, answered
 * from the cassette, and compare. */
export async function replayCassette(ctx: Ctx, data: unknown, config: Required<CassettesConfig>): Promise<CassetteReplayResponse> {
  const req = cassetteReplayRequest.safeParse(data);
  if (!req.success) throw new IIIError("invalid_arguments", `cassette::replay: ${formatIssues(req.error)}`);
  const { cassette } = req.data;
  const overrides: ReplayOverrides = req.data.overrides ?? {};
  const replayId = config.newReplayId();
  const sid = `${REPLAY_SESSION_PREFIX}${replayId}`;
  const record: ReplayRecord = { session_id: sid, cassette, overrides, started_at_ms: config.now() };
  await ctx.trigger({
    function_id: "state::set",
    payload: { scope: SCOPE_REPLAYS, key: replayId, value: record },
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  try {
    const start: Record<string, unknown> = {
      session_id: sid,
      provider: CASSETTE_PROVIDER,
      model: replayId,
      messages: cassette.input,
      // Room for every recorded step and one more, so a replay that would go on is seen doing so.
      max_turns: Math.min(Math.max(cassette.request.max_turns ?? 0, cassette.steps.length + 1), 1000),
      replay_id: replayId,
    };
    if (cassette.permissions) await applyPermissions(ctx, sid, cassette.permissions);
    if (cassette.request.mode) start.mode = cassette.request.mode;
    if (overrides.system_prompt !== undefined) start.system_prompt = overrides.system_prompt;
    const started = await ctx.trigger<unknown, { started?: boolean }>({
      function_id: "run::start",
      payload: start,
      timeoutMs: QUERY_TIMEOUT_MS,
    });
    if (!started?.started)
      throw new IIIError("invocation_failed", `cassette::replay: run::start did not start the replay (${JSON.stringify(started)})`);
    const status = await waitForEnd(ctx, sid, config.now);
    const turn = turnOf(await readTranscript(ctx, sid), status.run_id) ?? { input: [], steps: [] };
    const differences = diffTurns(
      { steps: cassette.steps, final_state: cassette.final_state, final_text: cassette.final_text },
      { steps: turn.steps, final_state: status.state, final_text: textOf(turn.steps.at(-1)?.message) },
    );
    return cassetteReplayResponse.parse({
      same: differences.length === 0,
      differences,
      report: reportOf(differences),
      replay: { session_id: sid, turn_id: status.run_id, state: status.state },
    });
  } finally {
    await ctx
      .trigger({ function_id: "state::delete", payload: { scope: SCOPE_REPLAYS, key: replayId }, timeoutMs: QUERY_TIMEOUT_MS })
      .catch((e: unknown) => console.warn(`cassettes: replay record ${replayId} not deleted: ${(e as Error).message}`));
  }
}

async function waitForEnd(ctx: Ctx, sid: string, now: () => number): Promise<RunStatus> {
  const deadline = now() + REPLAY_TIMEOUT_MS;
  for (;;) {
    const s = await runStatus(ctx, sid);
    if (s && TERMINAL.has(s.state)) return s;
    if (now() > deadline) {
      await ctx.trigger({ function_id: "turn::stop", payload: { session_id: sid }, timeoutMs: QUERY_TIMEOUT_MS }).catch(() => undefined);
      throw new IIIError(
        "timeout",
        `cassette::replay: the replay in ${sid} did not end within ${REPLAY_TIMEOUT_MS} ms (state ${s?.state ?? "none"})`,
      );
    }
    await new Promise((r) => setTimeout(r, REPLAY_POLL_MS));
  }
}

/** `cassette::answer`: a replayed call's recorded result, or the person's recorded decision. */
async function answer(ctx: Ctx, data: unknown): Promise<ReplayAnswer> {
  const req = replayAnswerRequest.safeParse(data);
  if (!req.success) throw new IIIError("invalid_arguments", `cassette::answer: ${formatIssues(req.error)}`);
  const { cassette } = await loadReplay(ctx, req.data.replay_id, req.data.session_id);
  const call = cassette.steps.flatMap((s) => s.calls).find((c) => c.function_call_id === req.data.function_call_id);
  if (!call) return { found: false, reason: `the recorded turn made no call ${req.data.function_call_id}` };
  if (call.function_id !== req.data.function_id)
    return { found: false, reason: `the recorded call ${call.function_call_id} reached ${call.function_id}, not ${req.data.function_id}` };
  if (req.data.approval) {
    const decision = call.gate?.approval;
    return decision ? { found: true, decision } : { found: false, reason: "the recorded turn asked nobody about this call" };
  }
  if (!call.result) return { found: false, reason: "the recorded turn has no result for this call" };
  return { found: true, result: call.result, is_error: call.is_error };
}

/** `cassette::check_permissions`: `policy::check_permissions` for a replayed call, with the
 * replay's policy override when it has one. */
async function checkPermissions(ctx: Ctx, data: unknown): Promise<unknown> {
  const req = replayCheckRequest.safeParse(data);
  if (!req.success) throw new IIIError("invalid_arguments", `cassette::check_permissions: ${formatIssues(req.error)}`);
  const { overrides } = await loadReplay(ctx, req.data.replay_id, req.data.session_id);
  const payload: Record<string, unknown> = { function_id: req.data.function_id, args: req.data.args, session_id: req.data.session_id };
  if (req.data.with_version) payload.with_version = true;
  if (overrides?.policy) payload.policy = overrides.policy;
  return ctx.trigger({ function_id: "policy::check_permissions", payload, timeoutMs: QUERY_TIMEOUT_MS });
}

export function registerCassettes(iii: WorkerSurface, config: CassettesConfig = {}): void {
  const full: Required<CassettesConfig> = { newReplayId: config.newReplayId ?? (() => crypto.randomUUID()), now: config.now ?? Date.now };
  // Export and replay act for their caller: the session read and the replay's scratch session are theirs.
  iii.registerFunction("cassette::export", (data: unknown, ctx) => exportCassette(actingFor(ctx, ctx.caller), data, full.now), {
    description:
      "Export a finished turn as a cassette: {session_id, turn_id} → versioned JSON (docs/cassettes.md): each model step's final message and usage, each call's arguments, result, policy decision and version, and a person's decision. turn_running / turn_not_found otherwise.",
    metadata: { caller_principal: true },
    request_format: z.toJSONSchema(cassetteExportRequest),
    response_format: responseFormat(cassetteSchema),
  });
  iii.registerFunction("cassette::replay", (data: unknown, ctx) => replayCassette(actingFor(ctx, ctx.caller), data, full), {
    description:
      "Replay a cassette through the orchestrator with no provider and no side effects: {cassette, overrides?: {policy?, system_prompt?, model?}} → {same, differences, report, replay: {session_id, turn_id, state}}.",
    metadata: { caller_principal: true },
    response_format: responseFormat(cassetteReplayResponse),
  });
  iii.registerFunction("cassette::answer", (data: unknown, ctx) => answer(ctx, data), {
    description: "During a replay: a call's recorded result or a person's recorded decision (the orchestrator asks; nothing is invoked).",
    metadata: { internal: true },
    response_format: responseFormat(replayAnswerResponse),
  });
  iii.registerFunction("cassette::check_permissions", (data: unknown, ctx) => checkPermissions(ctx, data), {
    description: "During a replay: policy::check_permissions for a call, under the replay's policy override when it has one.",
    metadata: { internal: true },
  });
  iii.registerFunction(
    `provider::${CASSETTE_PROVIDER}::stream`,
    async (data: unknown, ctx) => {
      const model = isRecord(data) && typeof data.model === "string" ? data.model : "";
      const sid = `${REPLAY_SESSION_PREFIX}${model}`;
      return streamStep(iii, data, () => loadReplay(ctx, model, sid), full.now);
    },
    {
      description: "During a replay: answers each model step from the cassette, as a provider would (no model is called).",
      metadata: { internal: true },
    },
  );
}

export const worker: WorkerModule<CassettesConfig> = {
  name: "cassettes",
  kernel: true,
  register: (iii, config) => registerCassettes(iii, config ?? {}),
};
export default worker;
