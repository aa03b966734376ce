// Function-call hooks (docs/harness-contracts.md §6.3, §7 item 1): around every dispatched call,
// `agent::before_function_call` (first_block_wins: a subscriber may deny the call or rewrite its
// arguments) and `agent::after_function_call` (field_merge: a subscriber may rewrite the result),
// both through `hook-fanout::publish_collect` — and neither costs anything when nobody subscribes:
// a per-topic subscriber-presence cache answers "no durable:subscriber on this topic" without an
// engine call.
//
// What invalidates the cache, and how fast:
//  1. `engine::functions-available` (bound here to `turn::on_functions_changed`): the engine fires it
//     ~10 ms after any change to the set of function ids — a subscriber process connecting with its
//     function, or going away (its triggers go with it). The next call looks again.
//  2. A lookup made within PRESENCE_SETTLE_MS of such a change is not cached: a subscriber's trigger
//     registration follows its function's by a moment, and must not be missed for a whole TTL.
//  3. PRESENCE_TTL_MS: a trigger bound later to a function that already existed announces nothing
//     (the engine announces function changes, not trigger changes), and in a deployed Worker the
//     notification may reach another isolate than the one whose cache is stale; both are seen
//     within the TTL.
// A lookup that fails counts as "subscribed" (fail-safe: never drop a hook silently; a gate then
// fails closed if hook-fanout cannot be reached either).
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { isErrorResult } from "./gate.ts";
import { textBlock } from "./messages.ts";
import { TRIGGER_TYPES, isRecord } from "@iii-edge/protocol";
import {
  AFTER_FUNCTION_CALL_TOPIC,
  BEFORE_FUNCTION_CALL_TOPIC,
  PUBLISH_COLLECT,
  type AfterFunctionCallPayload,
  type BeforeFunctionCallPayload,
  type ContentBlock,
  type FunctionCall,
  type FunctionResult,
  type HookDenialEnvelope,
  type PublishCollectRequest,
} from "@iii-edge/protocol/harness";
import { clipString, gateUnavailableEnvelope, redactArgs } from "./denials.ts";
import type { WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";

/** How long a presence answer is trusted without a change notification: what a trigger bound to an
 * existing function (announced by nothing) waits at most to be used; one engine query per 5 s is
 * nothing next to a call, and no subscriber-less call waits for it. */
export const PRESENCE_TTL_MS = 5_000;
/** After a change notification, lookups are not cached for this long: an iii-sdk worker sends its
 * trigger registrations right after its functions (the same tick), far inside a second. */
export const PRESENCE_SETTLE_MS = 1_000;
/** `engine::registered-triggers::list` is a local read of the engine's catalog. */
export const PRESENCE_LOOKUP_TIMEOUT_MS = 2_000;
/** Pages of 1000 bindings one lookup reads at most: 20 000 durable subscribers is past any deployment. */
export const PRESENCE_MAX_PAGES = 20;
/** A before-call gate's deadline: the policy's own budget (§3.3, 5 s). Subscribers that answer end the
 * wait at once; one that does not denies the call (fail closed) when it runs out. */
export const BEFORE_HOOK_TIMEOUT_MS = 5_000;
/** An after-call hook's deadline. A collector that always waits its deadline out needs a short
 * one (500 ms, paid on every call); ours ends when every subscriber answered, so this only bounds a
 * silent one, with room for a loaded box. A missing reply keeps the original result. */
export const AFTER_HOOK_TIMEOUT_MS = 2_000;
/** publish_collect's own work past its deadline (the final read of the reply group, the deletes). */
export const HOOK_CALL_MARGIN_MS = 3_000;
export const ON_FUNCTIONS_CHANGED = "turn::on_functions_changed";

// ------------------------------------------------------------------ subscriber presence

const registeredTriggersPage = z.looseObject({
  registered_triggers: z.array(z.looseObject({ function_id: z.string(), status: z.string().optional(), config: z.unknown() })),
  next_offset: z.number().int().nonnegative().optional(),
});

/** Subscribed function ids per topic, from the engine's `durable:subscriber` bindings. */
async function lookupSubscribers(trigger: Trigger): Promise<Map<string, Set<string>>> {
  const byTopic = new Map<string, Set<string>>();
  let offset = 0;
  for (let page = 0; page < PRESENCE_MAX_PAGES; page++) {
    const raw = await trigger({
      function_id: "engine::registered-triggers::list",
      payload: { trigger_type: TRIGGER_TYPES.durableSubscriber, limit: 1_000, offset },
      timeoutMs: PRESENCE_LOOKUP_TIMEOUT_MS,
    });
    const r = registeredTriggersPage.parse(raw);
    for (const b of r.registered_triggers) {
      const topic = isRecord(b.config) ? b.config.topic : undefined;
      if (typeof topic !== "string" || (b.status !== undefined && b.status !== "active")) continue;
      let fns = byTopic.get(topic);
      if (!fns) byTopic.set(topic, (fns = new Set()));
      fns.add(b.function_id);
    }
    if (r.next_offset === undefined) break;
    offset = r.next_offset;
  }
  return byTopic;
}

/** Which topics have durable subscribers, cached (see the top of this file for what invalidates it). */
export class SubscriberPresence {
  #cached: { byTopic: Map<string, Set<string>>; expiresAt: number } | undefined;
  #inflight: Promise<Map<string, Set<string>>> | undefined;
  /** Bumped by every invalidation: a lookup that started before one is used once, not cached. */
  #generation = 0;
  #changedAt = Number.NEGATIVE_INFINITY;
  /** Engine queries made (for tests and the bench). */
  lookups = 0;

  readonly #lookup: (trigger: Trigger) => Promise<Map<string, Set<string>>>;
  readonly #now: () => number;

  constructor(lookup: (trigger: Trigger) => Promise<Map<string, Set<string>>> = lookupSubscribers, now: () => number = Date.now) {
    this.#lookup = lookup;
    this.#now = now;
  }

  /** How many distinct functions subscribe to `topic`; `undefined` when the lookup failed (callers
   * treat that as "subscribed"). */
  async subscribers(trigger: Trigger, topic: string): Promise<number | undefined> {
    const t = this.#now();
    if (this.#cached && t < this.#cached.expiresAt) return this.#cached.byTopic.get(topic)?.size ?? 0;
    try {
      return (await this.#fetch(trigger)).get(topic)?.size ?? 0;
    } catch (e) {
      console.warn(`turn-orchestrator: hook subscriber lookup failed, assuming subscribers: ${errorText(e)}`);
      return undefined;
    }
  }

  /** Forget what is known (a change notification). */
  invalidate(): void {
    this.#cached = undefined;
    this.#inflight = undefined;
    this.#generation++;
    this.#changedAt = this.#now();
  }

  #fetch(trigger: Trigger): Promise<Map<string, Set<string>>> {
    if (this.#inflight) return this.#inflight;
    const generation = this.#generation;
    this.lookups++;
    const p = this.#lookup(trigger).then(
      (byTopic) => {
        if (this.#inflight === p) this.#inflight = undefined;
        const t = this.#now();
        if (generation === this.#generation && t >= this.#changedAt + PRESENCE_SETTLE_MS)
          this.#cached = { byTopic, expiresAt: t + PRESENCE_TTL_MS };
        return byTopic;
      },
      (e: unknown) => {
        if (this.#inflight === p) this.#inflight = undefined;
        throw e;
      },
    );
    this.#inflight = p;
    return p;
  }
}

/** The presence cache of this isolate (Worker) or process (Node): every orchestrator step in it
 * shares it, and the change notification clears it. */
export const presence = new SubscriberPresence();

/** `turn::on_functions_changed` on `engine::functions-available`: the cache's push invalidation. */
export function registerHookPresence(iii: WorkerSurface, cache: SubscriberPresence = presence): void {
  iii.registerFunction(
    ON_FUNCTIONS_CHANGED,
    () => {
      cache.invalidate();
      return null;
    },
    { description: "engine::functions-available handler: forgets which hook topics have subscribers", metadata: { internal: true } },
  );
  iii.registerTrigger({ type: TRIGGER_TYPES.functionsAvailable, function_id: ON_FUNCTIONS_CHANGED, config: {} });
}

// ------------------------------------------------------------------ publish_collect answers

const collectResponse = z.looseObject({
  replies: z.array(z.unknown()).catch([]),
  merged: z.unknown(),
  publish: z
    .looseObject({ ok: z.boolean(), subscribers: z.number().int().nonnegative().optional(), error: z.string().optional() })
    .optional(),
  publish_failed: z.boolean().optional(),
});
type CollectResponse = z.infer<typeof collectResponse>;

async function publishCollect(trigger: Trigger, request: PublishCollectRequest, timeoutMs: number): Promise<CollectResponse> {
  return collectResponse.parse(
    await trigger({ function_id: PUBLISH_COLLECT, payload: request, timeoutMs: timeoutMs + HOOK_CALL_MARGIN_MS }),
  );
}

const describeFailure = (e: unknown): string =>
  e instanceof z.ZodError ? "an unreadable answer" : `${errorCode(e) ?? "error"}: ${errorText(e)}`;

// ------------------------------------------------------------------ before a call

export type BeforeCallOutcome = { kind: "run"; call: FunctionCall } | { kind: "deny"; result: FunctionResult };

/** What the model reads when a before-call hook blocked the call. */
export function hookDenialResult(call: FunctionCall, reason: unknown): FunctionResult {
  const text = typeof reason === "string" && reason.trim() !== "" ? clipString(reason.trim(), 2_000) : "no reason given";
  const envelope: HookDenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "hook",
    hook_topic: BEFORE_FUNCTION_CALL_TOPIC,
    function_id: call.function_id,
    args_excerpt: redactArgs(call.arguments),
    reason: `The call to \`${call.function_id}\` was blocked by a before-call hook: ${text}. It was not run. Do not retry the same call; change what the hook objects to, or do without it.`,
  };
  return { content: [textBlock(envelope.reason)], details: envelope, terminate: false };
}

/** The hook could not be consulted: deny, as the policy gate does (§3.5). */
function gateDown(call: FunctionCall, detail: string): BeforeCallOutcome {
  const envelope = gateUnavailableEnvelope(call.function_id, detail, call.arguments);
  return { kind: "deny", result: { content: [textBlock(envelope.reason)], details: envelope, terminate: false } };
}

/**
 * `agent::before_function_call` for a call that is allowed to run. No subscriber → the call as it
 * is, with no engine call. Otherwise: a blocking reply denies (the hook's reason); each other
 * reply's `arguments` object is laid over the arguments, field by field, in reply order; the hook
 * transport failing, or a subscriber not answering within BEFORE_HOOK_TIMEOUT_MS, denies
 * `gate_unavailable` (fail closed, §3.5).
 */
export async function beforeFunctionCall(
  trigger: Trigger,
  sessionId: string,
  call: FunctionCall,
  cache: SubscriberPresence = presence,
): Promise<BeforeCallOutcome> {
  if ((await cache.subscribers(trigger, BEFORE_FUNCTION_CALL_TOPIC)) === 0) return { kind: "run", call };
  const payload: BeforeFunctionCallPayload = { session_id: sessionId, function_call: call };
  let res: CollectResponse;
  try {
    res = await publishCollect(
      trigger,
      // No quiescence cut-off: a gate waits for every subscriber (or the deadline), never for the fastest.
      {
        topic: BEFORE_FUNCTION_CALL_TOPIC,
        payload,
        merge_rule: "first_block_wins",
        timeout_ms: BEFORE_HOOK_TIMEOUT_MS,
        quiescence_ms: BEFORE_HOOK_TIMEOUT_MS,
      },
      BEFORE_HOOK_TIMEOUT_MS,
    );
  } catch (e) {
    return gateDown(call, `before-call hook unavailable: ${describeFailure(e)}`);
  }
  if (res.publish_failed === true || res.publish?.ok === false)
    return gateDown(call, `before-call hook publish failed: ${res.publish?.error ?? "unknown error"}`);
  const blocker = [isRecord(res.merged) ? res.merged : undefined, ...res.replies].find(
    (r): r is Record<string, unknown> => isRecord(r) && r.block === true,
  );
  if (blocker) return { kind: "deny", result: hookDenialResult(call, blocker.reason) };
  const expected = res.publish?.subscribers;
  if (expected !== undefined && res.replies.length < expected) {
    return gateDown(
      call,
      `before-call hook: ${expected - res.replies.length} of ${expected} subscribers did not answer within ${BEFORE_HOOK_TIMEOUT_MS} ms`,
    );
  }
  let args: Record<string, unknown> | undefined;
  for (const r of res.replies) {
    if (!isRecord(r) || !isRecord(r.arguments)) continue;
    args = { ...(args ?? (isRecord(call.arguments) ? call.arguments : {})), ...r.arguments };
  }
  return { kind: "run", call: args ? { ...call, arguments: args } : call };
}

// ------------------------------------------------------------------ after a call

const isContent = (v: unknown): v is ContentBlock[] => Array.isArray(v) && v.every((b) => isRecord(b) && typeof b.type === "string");

/**
 * `agent::after_function_call` for a call that ran (`call` with the arguments it ran with). No
 * subscriber → the result as it is, with no engine call. Otherwise the `field_merge` of the replies
 * rewrites `content` (when it is a content list), `details` and `terminate`; no reply, a failed
 * publish or an unreachable hook-fanout keeps the original result.
 */
export async function afterFunctionCall(
  trigger: Trigger,
  sessionId: string,
  call: FunctionCall,
  result: FunctionResult,
  cache: SubscriberPresence = presence,
): Promise<FunctionResult> {
  if ((await cache.subscribers(trigger, AFTER_FUNCTION_CALL_TOPIC)) === 0) return result;
  const payload: AfterFunctionCallPayload = {
    session_id: sessionId,
    function_call: call,
    content: result.content,
    details: result.details,
    is_error: isErrorResult(result),
  };
  if (result.terminate !== undefined) payload.terminate = result.terminate;
  let res: CollectResponse;
  try {
    res = await publishCollect(
      trigger,
      {
        topic: AFTER_FUNCTION_CALL_TOPIC,
        payload,
        merge_rule: "field_merge",
        timeout_ms: AFTER_HOOK_TIMEOUT_MS,
        quiescence_ms: AFTER_HOOK_TIMEOUT_MS,
      },
      AFTER_HOOK_TIMEOUT_MS,
    );
  } catch (e) {
    console.warn(`turn-orchestrator: after-call hook for ${call.id} failed, keeping the result: ${describeFailure(e)}`);
    return result;
  }
  if (res.publish_failed === true || res.publish?.ok === false) {
    console.warn(
      `turn-orchestrator: after-call hook publish for ${call.id} failed, keeping the result: ${res.publish?.error ?? "unknown error"}`,
    );
    return result;
  }
  if (res.replies.length === 0 || !isRecord(res.merged)) return result;
  const m = res.merged;
  const out: FunctionResult = {
    content: isContent(m.content) ? m.content : result.content,
    details: "details" in m ? m.details : result.details,
  };
  const terminate = typeof m.terminate === "boolean" ? m.terminate : result.terminate;
  if (terminate !== undefined) out.terminate = terminate;
  return out;
}
