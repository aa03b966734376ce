// The surface a replaceable worker is written against: one `register(iii, config)` entry that runs
// two ways unchanged — inside a Worker with no socket (the engine reaches it by service binding,
// `./worker-edge.ts`), or alone as a Node process over WebSocket (`./worker-node.ts`). It is the
// part of iii-sdk's surface both can honour, plus engine channels, which a Worker cannot reach
// through iii-sdk's URL-based helpers.
import { IIIError, MODEL_METADATA_KEY, MODEL_NEVER, type StreamChannelRef } from "@iii-edge/protocol";
import type { Schema } from "./client/types.ts";
import type { FunctionOptions, InvocationContext, TriggerRequest } from "./client/types.ts";
import type { KeyedContext, KeyedHandler } from "./keyed.ts";
import { noopTracer, type Tracer } from "./telemetry.ts";

export type { AlarmOptions, KeyedContext, KeyedHandler, KeyedScope, KeyedSql, SqlValue } from "./keyed.ts";
export type { Attributes, AttributeValue, LogSeverity, Span, SpanKind, SpanOptions, Tracer } from "./telemetry.ts";
export { derivedSpanId, formatTraceparent, parseTraceparent } from "./telemetry.ts";
export {
  CAS_RETRIES,
  type CasOptions,
  type CasOutcome,
  casState,
  compareAndSet,
  type CompareAndSetOptions,
  readState,
  STATE_CALL_TIMEOUT_MS,
  type StateCallOptions,
  type StateRef,
} from "./state.ts";
export { compactionHardLimit, compactionUsableTokens } from "./compaction.ts";
export {
  base64url,
  credentialsKeyMaterial,
  deriveCredentialsKey,
  fromBase64url,
  signAuthProof,
  verifyAuthProof,
} from "./credentials.ts";

/** One end of an engine channel, attached (protocol/README.md §10). */
export interface ChannelWriter {
  /** Text goes as a text item, bytes as a binary item. Throws once the channel is closed. */
  write(item: string | Uint8Array): void;
  /** End the stream: the reader gets every item, then the end. */
  close(): void;
  /** Resolves when the engine closed this end (1000 normally; 1013 when its buffer overflowed). */
  readonly closed: Promise<{ code: number; reason: string }>;
}

export interface Channels {
  /** `engine::channels::create`: a fresh channel's two refs. */
  create(options?: { buffer_size?: number }): Promise<{ writer: StreamChannelRef; reader: StreamChannelRef }>;
  /** Attach to the write end (`direction: "write"`). */
  openWriter(ref: StreamChannelRef): Promise<ChannelWriter>;
  /** Attach to the read end (`direction: "read"`): every item in order until the writer ended. */
  read(ref: StreamChannelRef): AsyncIterable<string | Uint8Array>;
}

/** A handler: its payload and the invocation (metadata, trace, and `trigger` bound to the trace). */
// biome-ignore lint/suspicious/noExplicitAny: a handler typed with its own input must be assignable here
export type WorkerHandler<I = any, O = unknown> = (data: I, ctx: InvocationContext) => O | Promise<O>;

export interface WorkerFunctionOptions extends FunctionOptions {
  /** zod schema: input validated (`invalid_input` to the caller) and published as `request_format`. */
  input?: Schema;
  output?: Schema;
  /** Makes the function keyed: the payload field whose value names the instance each call runs on
   * (docs/keyed-workers.md). Published as metadata `keyed_by`. */
  key?: string;
}

/**
 * A keyed function's handler, typed with its instance: `ctx` has the key, the instance's SQLite
 * and its alarms beside the usual invocation.
 *
 *   iii.registerFunction("cart::add", keyed(async ({ item }: AddItem, ctx) => {
 *     ctx.sql.exec("INSERT INTO items (name) VALUES (?)", item);
 *   }), { key: "cart_id" });
 *
 * (A separate wrapper rather than an overload of `registerFunction`: surfaces that wrap
 * `registerFunction` with the plain handler type keep implementing it.) Registered without
 * `{ key }`, the handler is refused at its first call.
 */
// biome-ignore lint/suspicious/noExplicitAny: a handler typed with its own input must be assignable here
export function keyed<I = any, O = unknown>(handler: KeyedHandler<I, O>): WorkerHandler<I, O> {
  return (data, ctx) => {
    if (!isKeyedContext(ctx)) {
      throw new IIIError("function_not_invokable", `${ctx.function_id} has a keyed handler but was registered without { key }`);
    }
    return handler(data, ctx);
  };
}

function isKeyedContext(ctx: InvocationContext): ctx is KeyedContext {
  return typeof (ctx as Partial<KeyedContext>).key === "string" && typeof (ctx as Partial<KeyedContext>).sql === "object";
}

export interface WorkerTrigger {
  type: string;
  function_id: string;
  config?: unknown;
  metadata?: Record<string, unknown>;
  /** Stable id (derived from the declaration when absent, so a re-registration is idempotent). */
  id?: string;
}

/** What `register(iii, config)` gets. Registrations are declarations: call them during `register`. */
export interface WorkerSurface {
  /** Where this copy runs: "edge" (inside the Worker, by RPC) or "node" (a process, by WebSocket). */
  readonly runtime: "edge" | "node";
  /** With `options.key` the function is keyed: each call runs on the instance its key names, one
   * at a time; write its handler with `keyed(…)` to get that instance's storage and alarms in `ctx`
   * (docs/keyed-workers.md). */
  registerFunction(id: string, handler: WorkerHandler, options?: WorkerFunctionOptions): void;
  registerTrigger(trigger: WorkerTrigger): void;
  /** Call any function through the engine (prefer `ctx.trigger` inside a handler: it keeps the trace). */
  trigger<TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>): Promise<TOutput>;
  readonly channels: Channels;
  /** Settings by name: the Worker's vars and secrets, or the process environment. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Spans and correlated logs, sent to the engine (./telemetry.ts). A handler runs inside its
   * invocation's trace; a call made inside `tracer.withSpan` carries that span as its parent. Both
   * surfaces provide it; it is optional only so hand-made test surfaces need not (use `tracerOf`). */
  readonly tracer?: Tracer;
  /** How many times this surface's connection to the engine dropped: a handler that sees it change
   * while it runs knows the engine may have given its invocation up (a restart voids a queue
   * delivery's lease, and the message is delivered again). Absent where no connection can drop
   * under a running handler and leave it running (in the Worker, calls come by RPC). */
  connectionEpoch?(): number;
}

/** A typed call through the engine, as a worker's helpers take it (`iii.trigger` or `ctx.trigger`). */
export type Trigger = WorkerSurface["trigger"];

/** The surface's tracer, or one that records nothing (a hand-made surface in a test). */
export function tracerOf(iii: Pick<WorkerSurface, "tracer">): Tracer {
  return iii.tracer ?? noopTracer;
}

/** A worker: a name (its folder) and its one entry. */
export interface WorkerModule<Config = Record<string, unknown>> {
  readonly name: string;
  /** The harness's own machinery: every function this worker registers is marked not callable by a
   * model (metadata `model: "never"`, protocol's MODEL_METADATA_KEY), except the ids in
   * `modelCallable`. The mark is set here, where the function is registered, so a function added to
   * such a worker later is closed to models without anyone having to list it anywhere. */
  readonly kernel?: boolean;
  /** With `kernel`: the functions of this worker a model may call (the policy's rules still apply). */
  readonly modelCallable?: readonly string[];
  register(iii: WorkerSurface, config: Config): void;
  /** Builds the config from the Worker's env (vars, secrets *and* bindings such as `DB`) or from
   * `process.env` in Node; `register` gets its result. */
  configFrom?(env: Readonly<Record<string, unknown>>): Config;
}

/**
 * Call a function that writes into a fresh channel, and read the channel as it fills: `start` gets
 * the writer ref and builds the call, which is started, not awaited (its answer comes after its
 * last item). `onItem` sees every item in order and returns true to stop reading. Reading also
 * ends when the writer closes, when the call has settled and `drainGraceMs` passed (items written
 * before it answered may still be in flight), or at `timeoutMs + drainGraceMs` overall. Resolves
 * with whether `onItem` stopped it and the call's error, if it failed.
 */
export async function callIntoChannel(
  iii: { trigger(request: TriggerRequest): Promise<unknown>; channels: Channels },
  start: (writer: StreamChannelRef) => TriggerRequest,
  opts: { timeoutMs: number; drainGraceMs: number },
  onItem: (item: string | Uint8Array) => boolean | void,
): Promise<{ stopped: boolean; callError?: unknown }> {
  const { writer, reader } = await iii.channels.create();
  let callError: unknown;
  let giveUp!: () => void;
  const gaveUp = new Promise<typeof GAVE_UP>((resolve) => (giveUp = () => resolve(GAVE_UP)));
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  let drained = false;
  const budgetTimer = setTimeout(giveUp, opts.timeoutMs + opts.drainGraceMs);
  void iii
    .trigger({ ...start(writer), timeoutMs: opts.timeoutMs })
    .catch((e: unknown) => {
      callError = e;
    })
    .finally(() => {
      if (!drained) graceTimer = setTimeout(giveUp, opts.drainGraceMs);
    });
  const it = iii.channels.read(reader)[Symbol.asyncIterator]();
  let stopped = false;
  try {
    for (;;) {
      const r = await Promise.race([it.next(), gaveUp]);
      if (r === GAVE_UP || r.done) break;
      if (onItem(r.value) === true) {
        stopped = true;
        break;
      }
    }
  } finally {
    drained = true;
    clearTimeout(budgetTimer);
    if (graceTimer) clearTimeout(graceTimer);
    // Not awaited: a reader still waiting for its first item finishes when the channel closes.
    void it.return?.(undefined)?.catch(() => undefined);
  }
  return callError === undefined ? { stopped } : { stopped, callError };
}
const GAVE_UP = Symbol("gave up");

/** `options` as a module registers a function: with the kernel mark when the module is kernel and
 * the id is not one it lets models call. Explicit metadata is kept; the mark wins over its `model`. */
export function markedOptions<O extends { metadata?: Record<string, unknown> }>(
  module: Pick<WorkerModule<unknown>, "kernel" | "modelCallable">,
  id: string,
  options: O | undefined,
): O | undefined {
  if (!module.kernel || module.modelCallable?.includes(id)) return options;
  return { ...(options ?? ({} as O)), metadata: { ...(options?.metadata ?? {}), [MODEL_METADATA_KEY]: MODEL_NEVER } };
}
