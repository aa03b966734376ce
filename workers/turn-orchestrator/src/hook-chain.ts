// Hooks at every point of a turn (protocol/src/harness/hooks.ts, iii's hook contract): the bindings
// of the five `harness::hook::<point>` trigger types, and the chain that calls them in-path.
//
// The orchestrator runs the chain itself rather than through hook-fanout: a hook is a synchronous,
// result-bearing call at a point only this worker knows, whose outcome goes into its checkpoint,
// in a fixed order where the first deny or hold stops the rest. hook-fanout publishes to durable
// queues and collects whatever answers within a window: the right tool for the older
// publish-and-collect topics, the wrong one for an ordered middleware chain.
//
// No wait when nothing is bound: the bindings are cached per process (per isolate in a Worker)
// and a point with none costs no engine call. What invalidates the cache:
//  1. `engine::triggers-available` (bound here to `turn::on_hook_bindings_changed`): the engine
//     fires it when any binding is added or removed, a hook's included.
//  2. HOOK_BINDINGS_TTL_MS: in a deployed Worker that notice may reach another isolate than the
//     one whose cache is stale; the TTL bounds how long that one keeps the old set.
// A lookup that fails is a TransientError: the step goes back to the queue rather than run a
// turn past hooks it could not see.
import { errorText, formatIssues, globMatch, isRecord, TRIGGER_TYPES } from "@iii-edge/protocol";
import {
  HOOK_MAX_APPENDED_MESSAGES,
  HOOK_MAX_REASON_CHARS,
  HOOK_TRIGGER_TYPE_PREFIX,
  hookOutput,
  hookPointOf,
  parseHookConfig,
  type HookChange,
  type HookInput,
  type HookMutations,
  type HookPoint,
  type ResolvedHookConfig,
} from "@iii-edge/protocol/harness";
import type { WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";
import { errorCode, TransientError, type Trigger } from "./calls.ts";

/** How long a binding set is trusted without a change notice (see the top of this file): one engine
 * read per 5 s and isolate at most, and a hook bound meanwhile is used within that. */
export const HOOK_BINDINGS_TTL_MS = 5_000;
/** `engine::registered-triggers::list` is a local read of the engine's catalog. */
export const HOOK_LOOKUP_TIMEOUT_MS = 2_000;
/** Pages of 1000 bindings one lookup reads at most: far past any deployment's hooks. */
export const HOOK_LOOKUP_MAX_PAGES = 10;
export const ON_HOOK_BINDINGS_CHANGED = "turn::on_hook_bindings_changed";

/** One bound hook: the function the chain calls and its config with iii's defaults. */
export interface HookBinding {
  id: string;
  point: HookPoint;
  function_id: string;
  config: ResolvedHookConfig;
}

const bindingsPage = z.looseObject({
  registered_triggers: z.array(
    z.looseObject({
      id: z.string(),
      trigger_type: z.string(),
      function_id: z.string(),
      status: z.string().optional(),
      config: z.unknown(),
    }),
  ),
  next_offset: z.number().int().nonnegative().optional(),
});

/** Every active hook binding, by point, from the engine's catalog. */
export async function lookupHookBindings(trigger: Trigger): Promise<Map<HookPoint, HookBinding[]>> {
  const byPoint = new Map<HookPoint, HookBinding[]>();
  let offset = 0;
  for (let page = 0; page < HOOK_LOOKUP_MAX_PAGES; page++) {
    const raw = await trigger({
      function_id: "engine::registered-triggers::list",
      payload: { search: HOOK_TRIGGER_TYPE_PREFIX, limit: 1_000, offset },
      timeoutMs: HOOK_LOOKUP_TIMEOUT_MS,
    });
    const r = bindingsPage.parse(raw);
    for (const b of r.registered_triggers) {
      const point = hookPointOf(b.trigger_type);
      if (!point || (b.status !== undefined && b.status !== "active")) continue;
      // The engine refused bad configs when they were bound; one that still does not read is skipped.
      const config = parseHookConfig(point, b.config);
      if (!config.success) {
        console.warn(`turn-orchestrator: hook binding ${b.id} has an unreadable config (skipped): ${formatIssues(config.error)}`);
        continue;
      }
      let list = byPoint.get(point);
      if (!list) byPoint.set(point, (list = []));
      list.push({ id: b.id, point, function_id: b.function_id, config: config.data });
    }
    if (r.next_offset === undefined) break;
    offset = r.next_offset;
  }
  return byPoint;
}

/** The hook bindings of this process, cached (see the top of this file for what invalidates it). */
export class HookBindings {
  #cached: { byPoint: Map<HookPoint, HookBinding[]>; expiresAt: number } | undefined;
  #inflight: Promise<Map<HookPoint, HookBinding[]>> | undefined;
  #generation = 0;
  /** Engine reads made (for tests and the bench). */
  lookups = 0;
  readonly #lookup: (trigger: Trigger) => Promise<Map<HookPoint, HookBinding[]>>;
  readonly #now: () => number;

  constructor(lookup: (trigger: Trigger) => Promise<Map<HookPoint, HookBinding[]>> = lookupHookBindings, now: () => number = Date.now) {
    this.#lookup = lookup;
    this.#now = now;
  }

  /** The bindings of `point` (empty: nothing to call). Throws a TransientError when the engine
   * cannot be read. */
  async of(trigger: Trigger, point: HookPoint): Promise<HookBinding[]> {
    if (this.#cached && this.#now() < this.#cached.expiresAt) return this.#cached.byPoint.get(point) ?? [];
    try {
      return (await this.#fetch(trigger)).get(point) ?? [];
    } catch (e) {
      throw new TransientError(`hook bindings unreadable: ${errorCode(e) ?? "error"}: ${errorText(e)}`, { cause: e });
    }
  }

  invalidate(): void {
    this.#cached = undefined;
    this.#inflight = undefined;
    this.#generation++;
  }

  #fetch(trigger: Trigger): Promise<Map<HookPoint, HookBinding[]>> {
    if (this.#inflight) return this.#inflight;
    const generation = this.#generation;
    this.lookups++;
    const p = this.#lookup(trigger).then(
      (byPoint) => {
        if (this.#inflight === p) this.#inflight = undefined;
        // A change notice that arrived while this read was out: used once, not cached.
        if (generation === this.#generation) this.#cached = { byPoint, expiresAt: this.#now() + HOOK_BINDINGS_TTL_MS };
        return byPoint;
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

/** The binding cache of this isolate (Worker) or process (Node). */
export const hookBindings = new HookBindings();

/** `turn::on_hook_bindings_changed` on `engine::triggers-available`: the cache's push invalidation. */
export function registerHookBindings(iii: WorkerSurface, cache: HookBindings = hookBindings): void {
  iii.registerFunction(
    ON_HOOK_BINDINGS_CHANGED,
    () => {
      cache.invalidate();
      return null;
    },
    { description: "engine::triggers-available handler: forgets the cached harness::hook::* bindings", metadata: { internal: true } },
  );
  iii.registerTrigger({ type: TRIGGER_TYPES.triggersAvailable, function_id: ON_HOOK_BINDINGS_CHANGED, config: { delta: true } });
}

// ------------------------------------------------------------------ the chain

/** How the chain calls one hook, and waits: injected so the chain runs on a fake clock in tests. */
export interface ChainPorts {
  invoke(functionId: string, input: HookInput, timeoutMs: number): Promise<unknown>;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
  /** Asked when a hook's function is not found: whether its binding still exists. A worker that
   * went away took its bindings with it, and a cache that has not heard yet must not turn that
   * into a denial; a binding that outlives its function (engine-held) is a hook that is down. */
  stillBound?(b: HookBinding): Promise<boolean>;
}

export const enginePorts = (trigger: Trigger, cache: HookBindings = hookBindings): ChainPorts => ({
  invoke: (function_id, input, timeoutMs) => trigger({ function_id, payload: input, timeoutMs }),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
  stillBound: async (b) => {
    cache.invalidate();
    return (await cache.of(trigger, b.point)).some((x) => x.id === b.id);
  },
});

export type ChainOutcome =
  | { decision: "continue"; input: HookInput; changes: HookChange[] }
  | { decision: "deny"; by: string; reason: string; input: HookInput; changes: HookChange[] }
  | { decision: "hold"; by: string; pending_timeout_ms?: number; input: HookInput; changes: HookChange[] };

/** The target a call-point hook is about (its `functions` globs match this). */
const targetOf = (input: HookInput): string | undefined => input.call?.function_id ?? input.result?.function_id;

/** The chain's order for a point: ascending priority, ties by function id (then binding id, so the
 * order never depends on the engine's listing). */
export function chainOrder(bindings: readonly HookBinding[], input: HookInput): HookBinding[] {
  const target = targetOf(input);
  return bindings
    .filter((b) => !b.config.functions || (target !== undefined && b.config.functions.some((g) => globMatch(g, target))))
    .sort(
      (a, b) =>
        a.config.priority - b.config.priority ||
        (a.function_id < b.function_id ? -1 : a.function_id > b.function_id ? 1 : 0) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
}

const TIMED_OUT = Symbol("timed out");

/** One hook's answer within its deadline: the parsed output, or why there is none. */
async function ask(
  ports: ChainPorts,
  b: HookBinding,
  input: HookInput,
): Promise<{ output: z.output<typeof hookOutput> } | { failure: string } | { unbound: true }> {
  let timer: unknown;
  const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = ports.setTimer(() => resolve(TIMED_OUT), b.config.timeout_ms);
  });
  try {
    const raw = await Promise.race([ports.invoke(b.function_id, input, b.config.timeout_ms), deadline]);
    if (raw === TIMED_OUT) return { failure: `no answer within ${b.config.timeout_ms} ms` };
    const parsed = hookOutput.safeParse(raw);
    if (!parsed.success) return { failure: `an unreadable answer: ${formatIssues(parsed.error)}` };
    return { output: parsed.data };
  } catch (e) {
    if (errorCode(e) === "function_not_found" && ports.stillBound && !(await ports.stillBound(b))) return { unbound: true };
    return { failure: `${errorCode(e) ?? "error"}: ${errorText(e)}` };
  } finally {
    ports.clearTimer(timer);
  }
}

const clip = (s: string) => (s.length > HOOK_MAX_REASON_CHARS ? `${s.slice(0, HOOK_MAX_REASON_CHARS)}…` : s);

/** Apply a `continue`'s mutations that mean something at `input.point`; the kept part is returned
 * (undefined when nothing applied), or a string saying why they cannot be applied. */
function applyMutations(input: HookInput, m: HookMutations, appended: number): { next: HookInput; kept?: HookMutations } | string {
  const kept: HookMutations = {};
  const next: HookInput = { ...input };
  switch (input.point) {
    case "pre_generate": {
      if (!next.generate) break;
      if (m.append_messages && appended + m.append_messages.length > HOOK_MAX_APPENDED_MESSAGES)
        return `appends more than ${HOOK_MAX_APPENDED_MESSAGES} messages in one round`;
      next.generate = { ...next.generate };
      if (m.system_prompt !== undefined) next.generate.system_prompt = kept.system_prompt = m.system_prompt;
      if (m.append_messages && m.append_messages.length > 0) {
        kept.append_messages = m.append_messages;
        next.generate.messages = [...next.generate.messages, ...m.append_messages];
      }
      break;
    }
    case "pre_trigger":
      if (next.call && "arguments" in m && m.arguments !== undefined) {
        next.call = { ...next.call, arguments: m.arguments };
        kept.arguments = m.arguments;
      }
      break;
    case "post_trigger":
      if (!next.result) break;
      next.result = { ...next.result };
      if (m.content !== undefined) next.result.content = kept.content = m.content;
      if ("details" in m) next.result.details = kept.details = m.details;
      if (m.is_error !== undefined) next.result.is_error = kept.is_error = m.is_error;
      break;
    default:
      // pre_turn and post_generate change nothing.
      break;
  }
  return Object.keys(kept).length > 0 ? { next, kept } : { next };
}

/**
 * Run `point`'s chain over `input`: each hook gets the input as the previous ones left it; the first
 * deny or hold stops it. A hook that throws, misses its `timeout_ms` or answers something
 * unreadable (or a decision its point does not take) is resolved by its `on_error`: `fail_closed`
 * denies, `fail_open` skips it. `resumeAfter` (a hold's releaser) starts after that hook.
 */
export async function runHookChain(
  ports: ChainPorts,
  bindings: readonly HookBinding[],
  input: HookInput,
  opts: { resumeAfter?: string } = {},
): Promise<ChainOutcome> {
  let current = input;
  const changes: HookChange[] = [];
  let appended = 0;
  let chain = chainOrder(bindings, input);
  if (opts.resumeAfter !== undefined) {
    const at = chain.findIndex((b) => b.function_id === opts.resumeAfter);
    chain = at >= 0 ? chain.slice(at + 1) : chain;
  }
  for (const b of chain) {
    const answer = await ask(ports, b, current);
    if ("unbound" in answer) continue;
    let failure = "failure" in answer ? answer.failure : undefined;
    if ("output" in answer) {
      const out = answer.output;
      if (out?.decision === "deny" && current.point.startsWith("pre_")) {
        return { decision: "deny", by: b.function_id, reason: clip(out.reason.trim() || "no reason given"), input: current, changes };
      }
      if (out?.decision === "hold" && current.point === "pre_trigger") {
        const held: ChainOutcome = { decision: "hold", by: b.function_id, input: current, changes };
        if (out.pending_timeout_ms !== undefined) held.pending_timeout_ms = out.pending_timeout_ms;
        return held;
      }
      if (out && out.decision !== "continue") failure = `answered "${out.decision}", which ${current.point} does not take`;
      else if (out?.mutations) {
        const applied = applyMutations(current, out.mutations as HookMutations, appended);
        if (typeof applied === "string") failure = applied;
        else {
          current = applied.next;
          if (applied.kept) {
            appended += applied.kept.append_messages?.length ?? 0;
            const change: HookChange = { function_id: b.function_id, mutations: applied.kept };
            if (out.annotations) change.annotations = out.annotations;
            changes.push(change);
          }
        }
      }
    }
    if (failure === undefined) continue;
    if (b.config.on_error === "fail_open") {
      console.warn(`turn-orchestrator: ${current.point} hook ${b.function_id} failed, skipped (fail_open): ${failure}`);
      continue;
    }
    return {
      decision: "deny",
      by: b.function_id,
      reason: clip(`hook ${b.function_id} failed (fail_closed): ${failure}`),
      input: current,
      changes,
    };
  }
  return { decision: "continue", input: current, changes };
}

/** The envelope every hook input carries. */
export function hookEnvelope(point: HookPoint, sid: string, runId: string, step: number, depth: number): HookInput {
  return { point, session_id: sid, turn_id: runId, step, depth };
}

/** A run's sub-agent depth from its stored request (`parent.depth`; the root is 0). */
export function depthOf(req: unknown): number {
  const parent = isRecord(req) ? req.parent : undefined;
  return isRecord(parent) && typeof parent.depth === "number" ? parent.depth : 0;
}
