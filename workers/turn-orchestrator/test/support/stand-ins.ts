// Stand-ins for the function ids the orchestrator calls that no real worker here provides, each
// registered on its own connection like the worker it replaces: provisioning, the scripted model
// behind `provider::openai::stream` (it writes real AssistantMessageEvents into the real channel —
// the only part standing in for something paid), the functions the model calls, and a policy for
// what the real one cannot do on purpose (answer garbage, answer slowly, count its calls).
import { readFileSync } from "node:fs";
import path from "node:path";
import {
  AGENT_TRIGGER,
  AGENT_TRIGGER_FUNCTION,
  type AgentMessage,
  type AssistantMessage,
  type AssistantMessageEvent,
  type ContentBlock,
  type ErrorKind,
} from "@iii-edge/protocol/harness";
import type { EdgeClient } from "@iii-edge/sdk-edge/client";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { repoRoot } from "@iii-edge/test-support/engine-server";

/** Reconnect fast after an engine restart (the default starts at 1 s and doubles). */
export const FAST_RECONNECT = { reconnectionConfig: { initialDelayMs: 100, maxDelayMs: 500, jitterFactor: 0 } };

/** Every built-in harness worker left out of the deployed Worker: these suites bring their own. */
export const HARNESS_DISABLE = "harness,turn-orchestrator,provisioning,providers,auth-credentials,policy,approval-gate,session-storage";

/** The `QUEUES` var with `turn-step` in it: wrangler.toml's, plus the queue if it is not there
 * yet; `overrides` change its settings for one suite (e.g. a short lease). */
export function queuesWithTurnStep(overrides: Record<string, unknown> = {}): Record<string, string> {
  const toml = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
  const m = /^QUEUES\s*=\s*'(.*)'\s*$/m.exec(toml);
  const queues = m ? (JSON.parse(m[1]) as Record<string, Record<string, unknown>>) : {};
  if (queues["turn-step"] && Object.keys(overrides).length === 0) return {};
  queues["turn-step"] = {
    backend: "durable",
    type: "fifo",
    message_group_field: "session_id",
    max_retries: 3,
    backoff_ms: 200,
    concurrency: 100,
    timeout_ms: 360_000,
    ...queues["turn-step"],
    ...overrides,
  };
  return { QUEUES: JSON.stringify(queues) };
}

export const strip = ({ _caller_worker_id: _, ...rest }: Record<string, unknown>): Record<string, unknown> => rest;

export function connect(url: string, name: string, reconnect = false): RunningWorkers {
  return runWorkers(url, [], { workerName: name, ...(reconnect ? FAST_RECONNECT : {}) });
}

// ------------------------------------------------------------------ policy and provisioning

/** The rules the real policy worker runs with in these suites (III_PERMISSIONS). Anything else —
 * `test::other` — matches nothing and needs a person. */
export const TEST_PERMISSIONS = `version: 1
rules:
  - test::echo
  - test::terminate
  - test::block
  - rule_id: no-danger
    function: test::danger
    action: deny
`;

export type PolicyRule = "allow" | "deny" | "needs_approval" | "garbage" | { slowMs: number };

/** `calls`: the function ids asked about, in order; `calledAt`: when each call arrived. */
export function registerPolicy(client: EdgeClient, rules: Map<string, PolicyRule>): { calls: string[]; calledAt: number[] } {
  const seen = { calls: [] as string[], calledAt: [] as number[] };
  client.registerFunction("policy::check_permissions", async (d: { function_id: string }) => {
    seen.calls.push(d.function_id);
    seen.calledAt.push(Date.now());
    const rule = rules.get(d.function_id) ?? "needs_approval";
    if (typeof rule === "object") {
      await new Promise((r) => setTimeout(r, rule.slowMs));
      return { decision: "allow", rule_id: "slow" };
    }
    if (rule === "allow") return { decision: "allow", rule_id: d.function_id };
    if (rule === "deny") return { decision: "deny", rule_id: `no-${d.function_id}`, rule_action: "deny" };
    if (rule === "garbage") return { verdict: "maybe" };
    return { decision: "needs_approval" };
  });
  return seen;
}

export const SYSTEM_PROMPT = "You are a test agent.";

export function registerProvisioning(client: EdgeClient): { prepared: string[]; released: string[] } {
  const seen = { prepared: [] as string[], released: [] as string[] };
  client.registerFunction("provisioning::prepare", (d: { session_id: string }) => {
    seen.prepared.push(d.session_id);
    return { system_prompt: SYSTEM_PROMPT, function_schemas: [AGENT_TRIGGER_FUNCTION], model_meta: null };
  });
  client.registerFunction("provisioning::release", (d: { session_id: string }) => {
    seen.released.push(d.session_id);
    return { ok: true };
  });
  return seen;
}

// ------------------------------------------------------------------ the scripted model

export interface ProviderRequest {
  model: string;
  system_prompt: string | null;
  messages: AgentMessage[];
  tools: unknown[];
}
/** One model answer: frames, optionally with a pause (a promise) before the terminal one. */
export interface Answer {
  frames: AssistantMessageEvent[];
  holdBeforeTerminal?: Promise<void>;
}
/** A scenario's model: the n-th call (0-based) of its model name gets this answer. */
export type Script = (req: ProviderRequest, n: number) => Answer;

const base = (model: string, content: ContentBlock[], stop_reason: AssistantMessage["stop_reason"]): AssistantMessage => ({
  role: "assistant",
  content,
  stop_reason,
  model,
  provider: "openai",
  timestamp: Date.now(),
  usage: { input: 10, output: 5 },
});

export function textAnswer(model: string, text: string): Answer {
  const half = Math.ceil(text.length / 2);
  const p1 = base(model, [{ type: "text", text: text.slice(0, half) }], "end");
  const p2 = base(model, [{ type: "text", text }], "end");
  return {
    frames: [
      { type: "start", partial: base(model, [], "end") },
      { type: "text_start", partial: base(model, [{ type: "text", text: "" }], "end") },
      { type: "text_delta", partial: p1, delta: text.slice(0, half) },
      { type: "text_delta", partial: p2, delta: text.slice(half) },
      { type: "text_end", partial: p2 },
      { type: "done", message: p2 },
    ],
  };
}

export interface ScriptedCall {
  id: string;
  fn: string;
  payload?: Record<string, unknown>;
}

export function callAnswer(model: string, calls: ScriptedCall[], raw?: ContentBlock[]): Answer {
  const blocks: ContentBlock[] =
    raw ??
    calls.map((c) => ({
      type: "function_call",
      id: c.id,
      function_id: AGENT_TRIGGER,
      arguments: { function: c.fn, payload: c.payload ?? {} },
    }));
  const frames: AssistantMessageEvent[] = [{ type: "start", partial: base(model, [], "function_call") }];
  for (let i = 0; i < blocks.length; i++) {
    const partial = base(model, blocks.slice(0, i + 1), "function_call");
    frames.push(
      { type: "functioncall_start", partial },
      { type: "functioncall_delta", partial, delta: JSON.stringify((blocks[i] as { arguments?: unknown }).arguments ?? {}) },
      { type: "functioncall_end", partial },
    );
  }
  frames.push({ type: "done", message: base(model, blocks, "function_call") });
  return { frames };
}

export function errorAnswer(model: string, kind: ErrorKind, message: string): Answer {
  const m = { ...base(model, [], "error"), error_message: message, error_kind: kind };
  return {
    frames: [
      { type: "start", partial: base(model, [], "end") },
      { type: "error", error: m },
    ],
  };
}

export function registerProvider(
  client: EdgeClient,
  surface: RunningWorkers["surface"],
  scripts: Map<string, Script>,
): { requests: ProviderRequest[] } {
  const seen = { requests: [] as ProviderRequest[] };
  const counts = new Map<string, number>();
  client.registerFunction(
    "provider::openai::stream",
    async (d: ProviderRequest & { writer_ref: { channel_id: string; access_key: string; direction: "write" } }) => {
      const { writer_ref, ...req } = strip(d as unknown as Record<string, unknown>) as unknown as typeof d;
      seen.requests.push(req);
      const n = counts.get(req.model) ?? 0;
      counts.set(req.model, n + 1);
      const script = scripts.get(req.model);
      const writer = await surface.channels.openWriter(writer_ref);
      const answer = script ? script(req, n) : errorAnswer(req.model, "permanent", `no script for model ${req.model}`);
      const frames = [...answer.frames];
      const terminal = frames.pop()!;
      for (const f of frames) writer.write(JSON.stringify(f));
      if (answer.holdBeforeTerminal) await answer.holdBeforeTerminal;
      writer.write(JSON.stringify(terminal));
      writer.close();
      return { ok: true, status: "done" };
    },
  );
  return seen;
}

// ------------------------------------------------------------------ what the model calls

export interface TargetCall {
  fn: string;
  data: Record<string, unknown>;
  /** The invocation metadata: who is calling (the orchestrator's session, call id, function id). */
  metadata: unknown;
}

/** The calling session a target's metadata names. */
export const sessionOf = (c: TargetCall): unknown =>
  c.metadata && typeof c.metadata === "object" ? (c.metadata as { session_id?: unknown }).session_id : undefined;

/** `test::echo`, `test::danger`, `test::other`, `test::terminate` answer at once; `test::block`
 * waits until `gate.release()` (`gate.rearm()` makes the next calls wait again). */
export function registerTargets(client: EdgeClient): { calls: TargetCall[]; gate: { release: () => void; rearm: () => void } } {
  const calls: TargetCall[] = [];
  let release!: () => void;
  let wait!: Promise<void>;
  const rearm = () => {
    wait = new Promise<void>((r) => (release = r));
  };
  rearm();
  for (const fn of ["test::echo", "test::danger", "test::other", "test::terminate"]) {
    client.registerFunction(fn, (d: Record<string, unknown>, metadata: unknown) => {
      calls.push({ fn, data: strip(d), metadata });
      if (fn === "test::terminate") return { content: [{ type: "text", text: "finished" }], details: { done: true }, terminate: true };
      return { content: [{ type: "text", text: `${fn} ran` }], details: { echoed: strip(d) } };
    });
  }
  client.registerFunction("test::block", async (d: Record<string, unknown>, metadata: unknown) => {
    calls.push({ fn: "test::block", data: strip(d), metadata });
    await wait;
    return { content: [{ type: "text", text: "block finished" }], details: null };
  });
  return { calls, gate: { release: () => release(), rearm } };
}
