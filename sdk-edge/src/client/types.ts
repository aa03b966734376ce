// The public surface shared by both SDKs. It keeps iii-sdk's names and shapes (registerWorker,
// registerFunction, registerTrigger, registerTriggerType, trigger, addConnectionStateListener,
// shutdown) so code moves between iii and iii-edge unchanged, and adds zod-typed functions.
import type { z } from "zod";
import type { CallerPrincipal, HttpInvocation, IIIError, TriggerAction as WireTriggerAction } from "@iii-edge/protocol";

/** iii-sdk's connection states. `failed`: the reconnect policy gave up (maxRetries reached). */
export type ConnectionState = "disconnected" | "connecting" | "connected" | "reconnecting" | "failed";

export type TriggerAction = WireTriggerAction;
/** Builders for `trigger({ action })`, as in iii-sdk (`TriggerAction.Void()`, `.Enqueue({queue})`). */
export const TriggerAction = {
  Void: (): { type: "void" } => ({ type: "void" }),
  Enqueue: (opts: { queue: string; idempotencyKey?: string }): { type: "enqueue"; queue: string; idempotency_key?: string } =>
    opts.idempotencyKey === undefined
      ? { type: "enqueue", queue: opts.queue }
      : { type: "enqueue", queue: opts.queue, idempotency_key: opts.idempotencyKey },
} as const;

export interface EnqueueReceipt {
  messageReceiptId: string;
}

export interface TriggerRequest<TInput = unknown> {
  function_id: string;
  payload?: TInput;
  action?: TriggerAction;
  /** Deadline for a synchronous call (default: the client's `invocationTimeoutMs`, 30 s). */
  timeoutMs?: number;
  metadata?: unknown;
  /** Explicit trace context; by default taken from the active OTel context or the handler. */
  traceparent?: string;
  baggage?: string;
}

/** What a handler gets besides its payload. */
export interface InvocationContext {
  function_id: string;
  /** Absent when the engine invoked without expecting a result. */
  invocation_id?: string;
  metadata: unknown;
  traceparent?: string;
  baggage?: string;
  /** Who called, for a function registered with `metadata: { caller_principal: true }`: the
   * engine stamps it from the caller's grant. Absent: trusted code of this deployment called. */
  caller?: CallerPrincipal;
  /** `trigger` bound to this invocation's trace context: a call made with it continues the
   * caller's trace even after an `await` in a browser (where there is no AsyncLocalStorage). */
  trigger<TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>): Promise<TOutput>;
}

// `any` defaults keep iii-sdk's handler typing (its RemoteFunctionHandler defaults to any), so an
// untyped handler written for iii-sdk compiles unchanged; zod-typed functions are fully typed.
// biome-ignore lint/suspicious/noExplicitAny: a handler typed with its own input must be assignable here (iii-sdk's signature does the same)
export type FunctionHandler<TInput = any, TOutput = any> = (
  data: TInput,
  metadata: unknown,
  ctx: InvocationContext,
) => TOutput | Promise<TOutput>;

/** Options of `registerFunction(id, handler, options)` (iii-sdk's RegisterFunctionOptions). */
export interface FunctionOptions {
  description?: string;
  request_format?: unknown;
  response_format?: unknown;
  metadata?: Record<string, unknown>;
}

/** iii-sdk's object form: `registerFunction({ id, description, … }, handler)`. */
export interface FunctionDefinition extends FunctionOptions {
  id: string;
}

/** A zod schema (any zod 4 type). */
export type Schema = z.ZodType;

/** Options of a zod-typed function: `input` validates and publishes `request_format`. */
export interface TypedFunctionOptions<I extends Schema, O extends Schema | undefined>
  extends Omit<FunctionOptions, "request_format" | "response_format"> {
  input: I;
  output?: O;
}

/** The handler type of a zod-typed function: parsed input in, the output schema's input type out. */
export type TypedHandler<I extends Schema, O extends Schema | undefined> = (
  data: z.output<I>,
  metadata: unknown,
  ctx: InvocationContext,
) => OutputOf<O> | Promise<OutputOf<O>>;
export type OutputOf<O extends Schema | undefined> = O extends Schema ? z.input<O> : unknown;

export interface FunctionRef {
  id: string;
  unregister(): void;
}

/** Input of `registerTrigger`: iii-sdk calls the trigger type `type`; the wire calls it
 * `trigger_type`. Either is accepted. */
export type TriggerInput = {
  function_id: string;
  config?: unknown;
  metadata?: Record<string, unknown>;
  /** Stable id; generated (UUID) when absent. */
  id?: string;
} & ({ type: string; trigger_type?: undefined } | { trigger_type: string; type?: undefined });

export interface Trigger {
  id: string;
  unregister(): void;
}

export interface TriggerConfig<TConfig> {
  id: string;
  function_id: string;
  config: TConfig;
  metadata?: Record<string, unknown>;
}

/** A custom trigger type provider (iii-sdk's TriggerHandler). */
export interface TriggerHandler<TConfig> {
  registerTrigger(config: TriggerConfig<TConfig>): Promise<void>;
  unregisterTrigger(config: TriggerConfig<TConfig>): Promise<void>;
}

export interface TriggerTypeInput {
  id: string;
  description: string;
}

export interface TriggerTypeRef<TConfig = unknown> {
  id: string;
  registerTrigger(functionId: string, config: TConfig, metadata?: Record<string, unknown>): Trigger;
  registerFunction(functionId: string, handler: FunctionHandler, config: TConfig, metadata?: Record<string, unknown>): FunctionRef;
  unregister(): void;
}

export type { HttpInvocation };

/** The client both SDKs return from `registerWorker`. */
export interface EdgeClient {
  /** zod-typed: validates input (`invalid_input` to the caller) and publishes JSON Schema. */
  registerFunction<I extends Schema, O extends Schema | undefined = undefined>(
    id: string,
    handler: TypedHandler<I, O>,
    options: TypedFunctionOptions<I, O>,
  ): FunctionRef;
  /** iii-sdk 0.22.1 form; a `{url, …}` instead of a handler registers an HTTP-invoked function (§9). */
  registerFunction(id: string, handler: FunctionHandler | HttpInvocation, options?: FunctionOptions): FunctionRef;
  /** iii-sdk object form. */
  registerFunction(definition: FunctionDefinition, handler: FunctionHandler): FunctionRef;
  registerTrigger(trigger: TriggerInput): Trigger;
  registerTriggerType<TConfig = unknown>(triggerType: TriggerTypeInput, handler: TriggerHandler<TConfig>): TriggerTypeRef<TConfig>;
  unregisterTriggerType(triggerType: TriggerTypeInput): void;
  /** Call a function. Sync: resolves with its result. Void: resolves `undefined` at once.
   * Enqueue: resolves with `{ messageReceiptId }`. Failures reject with `IIIError` (`.code`). */
  trigger<TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>): Promise<TOutput>;
  addConnectionStateListener(listener: (state: ConnectionState) => void): () => void;
  getConnectionState(): ConnectionState;
  /** Try the engine again now instead of at the next scheduled retry (e.g. once a person signed in
   * and a token will be accepted); a live connection is dropped and re-established. */
  reconnect(): void;
  /** Why the client gave up (set with state `failed`): a URL with no WebSocket endpoint
   * (`not_found`, the engine's message naming the paths to dial), or the reconnect policy ran out.
   * Calls then fail at once with it. */
  readonly connectionError: IIIError | undefined;
  /** The engine-assigned id of the current connection (undefined until `workerregistered`). */
  readonly workerId: string | undefined;
  /** Send one telemetry frame (`OTLP`/`LOGS`/`MTRC` prefix + OTLP/JSON) on the control socket as a
   * binary frame; false when not connected (nothing is buffered). */
  sendTelemetry?(frame: string): boolean;
  shutdown(): Promise<void>;
}
