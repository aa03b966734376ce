// The transport-agnostic iii client used by both SDKs (Node over the global WebSocket, browsers
// over partysocket). It owns the registrations and replays them on every open in iii-sdk's order
// (protocol/README.md §2.6), the pending-call table, the bounded send buffer, handler dispatch and
// the custom trigger type providers. Every frame is built with the protocol/ types and every
// inbound frame is parsed with `parseEngineFrame`.
import sdkPackage from "../../package.json" with { type: "json" };
import { z } from "zod";
import {
  CALLER_PRINCIPAL_KEY,
  callerPrincipalIn,
  parseEngineFrame,
  IIIError,
  toErrorBody,
  DEFAULT_INVOKE_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  type ErrorBody,
  type EngineFrame,
  type HttpInvocation,
  type InvokeFunction,
  type InvocationResult,
  type RegisterFunction,
  type RegisterTrigger,
  type RegisterTriggerType,
  type WorkerFrame,
} from "@iii-edge/protocol";
import { outgoingTrace, runInTrace, syncAmbientTrace, type AmbientTrace, type TraceFields } from "./trace.ts";
export { syncAmbientTrace, type AmbientTrace, type TraceFields } from "./trace.ts";
import type {
  ConnectionState,
  EdgeClient,
  FunctionDefinition,
  FunctionHandler,
  FunctionOptions,
  FunctionRef,
  InvocationContext,
  Trigger,
  TriggerHandler,
  TriggerInput,
  TriggerRequest,
  TriggerTypeInput,
  TriggerTypeRef,
} from "./types.ts";
import type { Schema } from "./types.ts";
export type { Schema } from "./types.ts";

/** Frames kept while disconnected. iii-sdk's queue is unbounded; ours overflows with a typed
 * `not_connected` error so a long outage cannot grow memory without limit. 1024 frames covers
 * a burst of calls during a normal reconnect (1–30 s). */
export const MAX_BUFFERED_FRAMES = 1024;
/** Bytes kept while disconnected: four maximal frames, so one huge payload cannot starve others
 * and a tab does not hold more than a few MB for a dead socket. */
export const MAX_BUFFERED_BYTES = 4 * MAX_FRAME_BYTES;
/** How long `shutdown()` waits for handlers still running to send their results before it closes
 * the socket: a result that arrives after the close is lost, and its caller (a queue delivery, say)
 * would be answered `invocation_stopped` and retried elsewhere. Long enough for ordinary handlers,
 * short enough that a stuck one does not hold a process's exit. */
export const SHUTDOWN_DRAIN_MS = 5_000;
/** Extra time the client waits past a call's deadline before giving up locally: the engine
 * always answers (it enforces `timeout_ms` itself), so the local timer is only a backstop. */
export const LOCAL_TIMEOUT_GRACE_MS = 2_000;

/** Sent as `version` when the worker announces itself: the package's own version, so a release
 * never announces a stale one. */
export const SDK_VERSION: string = sdkPackage.version;

/**
 * Keep-alive: a JSON `{"type":"ping"}` every 20 s, answered by the engine's runtime without waking
 * the object (its WebSocket auto-response), and a socket that has sent nothing for 60 s is given up
 * and reconnected. iii-sdk does the same with protocol pings, which browsers and undici cannot send;
 * without this a half-open socket (a sleeping laptop, a NAT that forgot us) is never noticed.
 */
export const HEARTBEAT_INTERVAL_MS = 20_000;
export const HEARTBEAT_TIMEOUT_MS = 60_000;

/**
 * Close codes the engine uses for a client's configuration error (a path with no WebSocket
 * endpoint: 4404, engine-do/src/socket-paths.ts): reconnecting cannot fix them, so an adapter that
 * sees one stops and reports `failed` with the reason.
 */
export const FATAL_CLOSE_CODES: readonly number[] = [4404];

/** One socket that an adapter keeps (re)connected. */
export interface Link {
  /** Send one frame: text (the JSON frames), or binary (telemetry, `sendTelemetry`). Only called
   * between `open` and `close`. May throw if the socket died. */
  send(data: string | Uint8Array<ArrayBuffer>): void;
  /** Close for good (no reconnect). */
  close(): void;
  /** Give up on the current socket (it went silent) and reconnect as after a drop. */
  drop(): void;
}

/** What an adapter reports about its socket. */
export interface LinkEvents {
  open(): void;
  message(data: string | ArrayBuffer): void;
  /** The socket dropped; the adapter reconnects unless `Link.close` was called. */
  close(): void;
  /** The adapter gave up: reconnecting cannot help (a wrong URL: `error` says what is wrong and
   * what to dial instead) or the reconnect policy ran out (maxRetries). */
  failed(error?: IIIError): void;
}

export type Connector = (events: LinkEvents) => Link;

/** A call persisted across reloads (sdk-browser's idb-keyval outbox). */
export interface OutboxEntry {
  id: string;
  frame: InvokeFunction;
  created_at: number;
}
export interface Outbox {
  put(entry: OutboxEntry): Promise<void>;
  /** Send every stored entry in order with `send` (true = the socket took it); remove each entry
   * only after it was sent. Must not run twice at once for the same store. */
  drain(send: (entry: OutboxEntry) => boolean): Promise<void>;
}

export interface Logger {
  warn(message: string, detail?: unknown): void;
  error(message: string, detail?: unknown): void;
}

export interface ClientOptions {
  /** Reported in `engine::workers::register` (iii-sdk: `workerName`). */
  workerName?: string;
  workerDescription?: string;
  /** iii-edge extension shown by `engine::workers::list`. */
  metadata?: Record<string, unknown>;
  /** Default deadline of synchronous calls (iii-sdk's option name). */
  invocationTimeoutMs?: number;
  /** Keep-alive timing (defaults HEARTBEAT_INTERVAL_MS / HEARTBEAT_TIMEOUT_MS); false turns it off. */
  heartbeat?: { intervalMs: number; timeoutMs: number } | false;
  logger?: Logger;
}

export interface CoreOptions extends ClientOptions {
  connector: Connector;
  runtime: string;
  pid?: number;
  os?: string;
  ambient?: AmbientTrace;
  outbox?: Outbox;
  newId?: () => string;
  now?: () => number;
}

interface FunctionEntry {
  frame: RegisterFunction;
  handler?: FunctionHandler;
  input?: Schema;
  output?: Schema;
}
interface TriggerTypeEntry {
  frame: RegisterTriggerType;
  handler: TriggerHandler<unknown>;
}
interface PendingCall {
  function_id: string;
  resolve(value: unknown): void;
  reject(error: Error): void;
  timer?: ReturnType<typeof setTimeout>;
  /** Sent on the current socket (so it fails fast if that socket drops). */
  sent: boolean;
  timeoutMs: number;
}
interface Buffered {
  text: string;
  invocation_id?: string;
}

export function randomId(): string {
  const c = crypto;
  // randomUUID is missing outside secure contexts (a page on http://<LAN address>).
  if (typeof c.randomUUID === "function") return c.randomUUID();
  // crypto.randomUUID needs a secure context in browsers; getRandomValues does not.
  const b = new Uint8Array(16);
  c.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const consoleLogger: Logger = {
  warn: (m, d) => console.warn(`[iii-edge] ${m}`, d ?? ""),
  error: (m, d) => console.error(`[iii-edge] ${m}`, d ?? ""),
};

function isHttpInvocation(v: unknown): v is HttpInvocation {
  return typeof v === "object" && v !== null && typeof (v as { url?: unknown }).url === "string";
}

/** JSON Schema of a zod type for `request_format`/`response_format`; never throws. */
export function jsonSchemaOf(schema: Schema, io: "input" | "output"): unknown {
  try {
    return z.toJSONSchema(schema, { io, unrepresentable: "any" });
  } catch {
    return undefined;
  }
}

/** The payload a typed handler validates: the engine adds `_caller_worker_id` (§4.6) and, for
 * functions that ask, `_caller_principal` to object payloads; neither is part of the function's
 * input, so strict schemas must not see them (the principal reaches the handler as `ctx.caller`). */
export function withoutCallerId(data: unknown): unknown {
  if (data && typeof data === "object" && !Array.isArray(data) && ("_caller_worker_id" in data || CALLER_PRINCIPAL_KEY in data)) {
    const { _caller_worker_id: _drop, [CALLER_PRINCIPAL_KEY]: _principal, ...rest } = data as Record<string, unknown>;
    return rest;
  }
  return data;
}

/** Validate with zod; a failure becomes `invalid_input` with zod's issue text. */
export function parseInput(
  functionId: string,
  schema: Schema,
  data: unknown,
): { ok: true; data: unknown } | { ok: false; error: ErrorBody } {
  const parsed = schema.safeParse(withoutCallerId(data));
  if (parsed.success) return { ok: true, data: parsed.data };
  return { ok: false, error: { code: "invalid_input", message: `invalid input for ${functionId}: ${z.prettifyError(parsed.error)}` } };
}

export function parseOutput(
  functionId: string,
  schema: Schema,
  result: unknown,
): { ok: true; data: unknown } | { ok: false; error: ErrorBody } {
  const parsed = schema.safeParse(result);
  if (parsed.success) return { ok: true, data: parsed.data };
  return {
    ok: false,
    error: {
      code: "invocation_failed",
      message: `${functionId} returned a value that does not match its output schema: ${z.prettifyError(parsed.error)}`,
    },
  };
}

/** Normalise the three registerFunction forms into a frame + handler + schemas. */
export function functionEntry(
  idOrDef: string | FunctionDefinition,
  handler: FunctionHandler | HttpInvocation,
  options?: FunctionOptions & { input?: Schema; output?: Schema },
): FunctionEntry {
  const def: FunctionDefinition & { input?: Schema; output?: Schema } =
    typeof idOrDef === "string" ? { ...(options ?? {}), id: idOrDef } : { ...idOrDef };
  if (typeof def.id !== "string" || def.id.trim() === "") throw new IIIError("invalid_arguments", "function id must be a non-empty string");
  const frame: RegisterFunction = { type: "registerfunction", id: def.id };
  if (def.description !== undefined) frame.description = def.description;
  const request = def.request_format ?? (def.input ? jsonSchemaOf(def.input, "input") : undefined);
  const response = def.response_format ?? (def.output ? jsonSchemaOf(def.output, "output") : undefined);
  if (request !== undefined) frame.request_format = request;
  if (response !== undefined) frame.response_format = response;
  if (def.metadata !== undefined) frame.metadata = def.metadata;
  if (isHttpInvocation(handler)) {
    frame.invocation = handler;
    return { frame };
  }
  if (typeof handler !== "function")
    throw new IIIError("invalid_arguments", `handler of ${def.id} must be a function or an HTTP invocation`);
  return { frame, handler, input: def.input, output: def.output };
}

export class Client implements EdgeClient {
  private readonly opts: CoreOptions;
  private readonly log: Logger;
  private readonly ambient: AmbientTrace;
  private readonly newId: () => string;
  private readonly now: () => number;
  private readonly link: Link;
  private readonly functions = new Map<string, FunctionEntry>();
  private readonly triggerTypes = new Map<string, TriggerTypeEntry>();
  private readonly triggers = new Map<string, RegisterTrigger>();
  private readonly pending = new Map<string, PendingCall>();
  private buffer: Buffered[] = [];
  private bufferedBytes = 0;
  private readonly listeners = new Set<(state: ConnectionState) => void>();
  private state: ConnectionState = "connecting";
  private connected = false;
  private stopped = false;
  private currentWorkerId: string | undefined;
  private reattachToken: string | undefined;
  private draining = false;
  private drainAgain = false;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private lastInbound = 0;
  private fatal: IIIError | undefined;
  /** Handlers running now: shutdown() lets them answer before it closes the socket. */
  private readonly handling = new Set<Promise<void>>();
  private closing = false;

  constructor(opts: CoreOptions) {
    this.opts = opts;
    this.log = opts.logger ?? consoleLogger;
    this.ambient = opts.ambient ?? syncAmbientTrace();
    this.newId = opts.newId ?? randomId;
    this.now = opts.now ?? Date.now;
    this.link = opts.connector({
      open: () => this.onOpen(),
      message: (data) => this.onMessage(data),
      close: () => this.onClose(),
      failed: (error) => this.onFailed(error),
    });
  }

  /**
   * Why the client gave up connecting (state `failed`), e.g. a URL with no WebSocket endpoint:
   * `not_found` with the engine's message naming the paths to dial. Every pending and later call
   * fails with it too.
   */
  get connectionError(): IIIError | undefined {
    return this.fatal;
  }

  get workerId(): string | undefined {
    return this.currentWorkerId;
  }

  getConnectionState(): ConnectionState {
    return this.state;
  }

  reconnect(): void {
    if (this.stopped || this.fatal) return;
    this.link.drop();
  }

  addConnectionStateListener(listener: (state: ConnectionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // ---- registration -------------------------------------------------------------------------

  registerFunction(
    idOrDef: string | FunctionDefinition,
    handler: FunctionHandler | HttpInvocation,
    options?: FunctionOptions & { input?: Schema; output?: Schema },
  ): FunctionRef {
    const entry = functionEntry(idOrDef, handler, options);
    const id = entry.frame.id;
    this.functions.set(id, entry);
    // Registrations are not buffered while offline: the open replay sends them (iii-sdk does the same).
    if (this.connected) this.sendNow(entry.frame);
    return {
      id,
      unregister: () => {
        if (this.functions.get(id) !== entry) return;
        this.functions.delete(id);
        if (this.connected) this.sendNow({ type: "unregisterfunction", id });
      },
    };
  }

  registerTrigger(input: TriggerInput): Trigger {
    const trigger_type = input.trigger_type ?? input.type;
    if (!trigger_type) throw new IIIError("invalid_arguments", "registerTrigger needs a trigger type");
    if (!input.function_id) throw new IIIError("invalid_arguments", "registerTrigger needs a function_id");
    const id = input.id ?? this.newId();
    // §2.3: the Rust engine drops a registertrigger without config; send null instead.
    const frame: RegisterTrigger = {
      type: "registertrigger",
      id,
      trigger_type,
      function_id: input.function_id,
      config: input.config ?? null,
    };
    if (input.metadata !== undefined) frame.metadata = input.metadata;
    this.triggers.set(id, frame);
    if (this.connected) this.sendNow(frame);
    return {
      id,
      unregister: () => {
        if (!this.triggers.delete(id)) return;
        this.sendOrBuffer({ type: "unregistertrigger", id, trigger_type });
      },
    };
  }

  registerTriggerType<TConfig = unknown>(input: TriggerTypeInput, handler: TriggerHandler<TConfig>): TriggerTypeRef<TConfig> {
    if (!input.id) throw new IIIError("invalid_arguments", "trigger type id must be a non-empty string");
    const frame: RegisterTriggerType = { type: "registertriggertype", id: input.id, description: input.description ?? "" };
    this.triggerTypes.set(input.id, { frame, handler: handler as TriggerHandler<unknown> });
    if (this.connected) this.sendNow(frame);
    return {
      id: input.id,
      registerTrigger: (function_id, config, metadata) => this.registerTrigger({ trigger_type: input.id, function_id, config, metadata }),
      registerFunction: (function_id, fnHandler, config, metadata) => {
        const ref = this.registerFunction(function_id, fnHandler);
        const trig = this.registerTrigger({ trigger_type: input.id, function_id, config, metadata });
        return {
          id: ref.id,
          unregister: () => {
            trig.unregister();
            ref.unregister();
          },
        };
      },
      unregister: () => this.unregisterTriggerType(input),
    };
  }

  unregisterTriggerType(input: TriggerTypeInput): void {
    if (!this.triggerTypes.delete(input.id)) return;
    if (this.connected) this.sendNow({ type: "unregistertriggertype", id: input.id, description: input.description });
  }

  // ---- calls ----------------------------------------------------------------------------------

  trigger<TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>): Promise<TOutput> {
    return this.call(request, this.ambient.get()) as Promise<TOutput>;
  }

  /** `trigger` with the trace fields of a handler's invocation as the fallback context. */
  private async call(request: TriggerRequest<unknown>, inherited: TraceFields | undefined): Promise<unknown> {
    if (this.stopped) throw new IIIError("not_connected", "the client was shut down");
    // Gave up for good: fail now, with the reason, rather than buffer a call that can never go out.
    if (this.fatal) throw new IIIError(this.fatal.code, this.fatal.message, { cause: this.fatal });
    if (!request || typeof request.function_id !== "string" || request.function_id === "") {
      throw new IIIError("invalid_arguments", "trigger needs a function_id");
    }
    const trace = outgoingTrace({ traceparent: request.traceparent, baggage: request.baggage }, inherited);
    const action = request.action;
    const frame: InvokeFunction = { type: "invokefunction", function_id: request.function_id, data: request.payload ?? null };
    if (request.metadata !== undefined) frame.metadata = request.metadata;
    if (trace.traceparent) frame.traceparent = trace.traceparent;
    if (trace.baggage) frame.baggage = trace.baggage;

    if (action?.type === "void") {
      frame.action = action;
      if (!this.connected && this.opts.outbox) {
        await this.persist(frame, this.newId());
        return undefined;
      }
      this.sendOrBuffer(frame);
      return undefined;
    }

    const invocation_id = this.newId();
    frame.invocation_id = invocation_id;
    const timeoutMs = request.timeoutMs ?? this.opts.invocationTimeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
    if (action?.type === "enqueue") {
      frame.action = action;
      if (!this.connected && this.opts.outbox) {
        // The outbox entry id doubles as the idempotency key, so a resend after a reload is
        // deduplicated by the engine (it returns the first receipt).
        frame.action = { ...action, idempotency_key: action.idempotency_key ?? invocation_id };
        // No local timer until the entry is sent: it waits for the connection (see README).
        const result = this.expect(invocation_id, request.function_id, timeoutMs, "outbox");
        await this.persist(frame, invocation_id);
        return result;
      }
    } else {
      frame.timeout_ms = timeoutMs;
    }
    const result = this.expect(invocation_id, request.function_id, timeoutMs, "buffered");
    try {
      if (this.sendOrBuffer(frame, invocation_id)) this.markSent(invocation_id);
    } catch (err) {
      this.settle(invocation_id, undefined, err instanceof Error ? err : new Error(String(err)));
    }
    return result;
  }

  /** Register a pending call. A buffered call times out like iii-sdk's queued calls (it is then
   * dropped from the buffer); an outbox call waits for the connection, then gets its deadline. */
  private expect(invocation_id: string, function_id: string, timeoutMs: number, mode: "sent" | "buffered" | "outbox"): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const p: PendingCall = { function_id, resolve, reject, sent: false, timeoutMs };
      this.pending.set(invocation_id, p);
      if (mode === "sent") this.markSent(invocation_id);
      else if (mode === "buffered") this.armTimer(invocation_id, p);
    });
  }

  private armTimer(invocation_id: string, p: PendingCall): void {
    if (p.timer) clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      this.dropBuffered(invocation_id);
      this.settle(invocation_id, undefined, new IIIError("timeout", `${p.function_id} did not answer within ${p.timeoutMs} ms`));
    }, p.timeoutMs + LOCAL_TIMEOUT_GRACE_MS);
  }

  private markSent(invocation_id: string): void {
    const p = this.pending.get(invocation_id);
    if (!p) return;
    p.sent = true;
    this.armTimer(invocation_id, p);
  }

  private settle(invocation_id: string, value: unknown, error?: Error): void {
    const p = this.pending.get(invocation_id);
    if (!p) return;
    this.pending.delete(invocation_id);
    if (p.timer) clearTimeout(p.timer);
    if (error) p.reject(error);
    else p.resolve(value);
  }

  private async persist(frame: InvokeFunction, id: string): Promise<void> {
    const outbox = this.opts.outbox;
    if (!outbox) return;
    await outbox.put({ id, frame, created_at: this.now() });
    // The socket may have opened while we were writing: make sure the entry goes out now.
    if (this.connected) void this.drainOutbox();
  }

  private async drainOutbox(): Promise<void> {
    const outbox = this.opts.outbox;
    if (!outbox) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = true;
    try {
      do {
        this.drainAgain = false;
        await outbox.drain((entry) => {
          if (!this.connected) return false;
          if (!this.trySend(JSON.stringify(entry.frame))) return false;
          if (entry.frame.invocation_id) this.markSent(entry.frame.invocation_id);
          return true;
        });
      } while (this.drainAgain && this.connected);
    } catch (err) {
      this.log.error("outbox drain failed", err);
    } finally {
      this.draining = false;
    }
  }

  // ---- sending --------------------------------------------------------------------------------

  /**
   * One telemetry frame (`OTLP…`/`LOGS…`/`MTRC…`: a 4-byte prefix, then OTLP/JSON) as a binary frame
   * on the control socket, which the engine takes as its `/otel` socket would. Never buffered
   * here: false when not connected, and the tracer keeps the batch (it has its own bound).
   */
  sendTelemetry(frame: string): boolean {
    if (!this.connected || this.stopped) return false;
    try {
      // (Typed as ArrayBuffer-backed: TextEncoder always makes a fresh ArrayBuffer.)
      this.link.send(new TextEncoder().encode(frame) as Uint8Array<ArrayBuffer>);
      return true;
    } catch (err) {
      this.log.warn("telemetry send failed; treating the socket as closed", err);
      return false;
    }
  }

  private trySend(text: string): boolean {
    if (!this.connected) return false;
    try {
      this.link.send(text);
      return true;
    } catch (err) {
      this.log.warn("send failed; treating the socket as closed", err);
      return false;
    }
  }

  /** Send on the open socket; registrations use this (they are replayed, never buffered). */
  private sendNow(frame: WorkerFrame): void {
    const text = JSON.stringify(frame);
    if (text.length > MAX_FRAME_BYTES)
      throw new IIIError("frame_too_large", `${frame.type} of ${text.length} bytes exceeds ${MAX_FRAME_BYTES}`);
    this.trySend(text);
  }

  /** Send now, or keep in the bounded buffer until the next open. Throws `not_connected` when
   * the buffer is full. */
  private sendOrBuffer(frame: WorkerFrame, invocation_id?: string): boolean {
    const text = JSON.stringify(frame);
    if (text.length > MAX_FRAME_BYTES)
      throw new IIIError("frame_too_large", `${frame.type} of ${text.length} bytes exceeds ${MAX_FRAME_BYTES}`);
    if (this.trySend(text)) return true;
    if (this.buffer.length >= MAX_BUFFERED_FRAMES || this.bufferedBytes + text.length > MAX_BUFFERED_BYTES) {
      throw new IIIError(
        "not_connected",
        `not connected to the engine and the send buffer is full (${MAX_BUFFERED_FRAMES} frames / ${MAX_BUFFERED_BYTES} bytes)`,
      );
    }
    this.buffer.push({ text, invocation_id });
    this.bufferedBytes += text.length;
    return false;
  }

  private dropBuffered(invocation_id: string): void {
    const i = this.buffer.findIndex((b) => b.invocation_id === invocation_id);
    if (i < 0) return;
    this.bufferedBytes -= this.buffer[i].text.length;
    this.buffer.splice(i, 1);
  }

  /** Replies (invocationresult, triggerregistrationresult) go out only on the socket the request
   * came in on: after a drop the engine has already answered the caller `invocation_stopped`. */
  private reply(frame: WorkerFrame): void {
    const text = JSON.stringify(frame);
    if (text.length > MAX_FRAME_BYTES && frame.type === "invocationresult") {
      this.trySend(
        JSON.stringify({
          ...frame,
          result: undefined,
          error: { code: "serialization_error", message: `result of ${text.length} bytes exceeds ${MAX_FRAME_BYTES}` },
        }),
      );
      return;
    }
    this.trySend(text);
  }

  // ---- socket events --------------------------------------------------------------------------

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    for (const l of this.listeners) {
      try {
        l(state);
      } catch (err) {
        this.log.warn("connection state listener threw", err);
      }
    }
  }

  private onOpen(): void {
    if (this.stopped) return;
    this.connected = true;
    // §2.6 order: reattach, trigger types, functions, triggers, queued frames, workers::register.
    if (this.currentWorkerId) {
      this.sendNow({
        type: "reattach",
        previous_worker_id: this.currentWorkerId,
        ...(this.reattachToken ? { reattach_token: this.reattachToken } : {}),
      });
    }
    for (const t of this.triggerTypes.values()) this.sendNow(t.frame);
    for (const f of this.functions.values()) this.sendNow(f.frame);
    for (const t of this.triggers.values()) this.sendNow(t);
    const queued = this.buffer;
    this.buffer = [];
    this.bufferedBytes = 0;
    for (const b of queued) {
      if (b.invocation_id && !this.pending.has(b.invocation_id)) continue; // timed out meanwhile
      if (!this.trySend(b.text)) break;
      if (b.invocation_id) this.markSent(b.invocation_id);
    }
    this.sendNow(this.workersRegisterFrame());
    this.startHeartbeat();
    this.setState("connected");
    void this.drainOutbox();
  }

  private workersRegisterFrame(): InvokeFunction {
    const o = this.opts;
    const data: Record<string, unknown> = { runtime: o.runtime, version: SDK_VERSION, name: o.workerName ?? `${o.runtime}-worker` };
    if (o.workerDescription !== undefined) data.description = o.workerDescription;
    if (o.pid !== undefined) data.pid = o.pid;
    if (o.os !== undefined) data.os = o.os;
    if (o.metadata !== undefined) data.metadata = o.metadata;
    return { type: "invokefunction", function_id: "engine::workers::register", data, action: { type: "void" } };
  }

  private startHeartbeat(): void {
    this.stopHeartbeat();
    const hb =
      this.opts.heartbeat === undefined ? { intervalMs: HEARTBEAT_INTERVAL_MS, timeoutMs: HEARTBEAT_TIMEOUT_MS } : this.opts.heartbeat;
    if (!hb) return;
    this.lastInbound = this.now();
    this.heartbeat = setInterval(() => {
      if (!this.connected) return;
      if (this.now() - this.lastInbound > hb.timeoutMs) {
        this.log.warn(`no frame from the engine for ${hb.timeoutMs} ms; reconnecting`);
        this.link.drop();
        return;
      }
      this.sendNow({ type: "ping" });
    }, hb.intervalMs);
    // Never the reason a Node process stays alive.
    (this.heartbeat as { unref?: () => void }).unref?.();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  private onClose(): void {
    this.stopHeartbeat();
    const wasConnected = this.connected;
    this.connected = false;
    // Fail fast: a synchronous call already on the dead socket cannot be answered on a new one
    // (the engine halts it), so reject it now instead of letting it wait for its timeout.
    for (const [id, p] of this.pending) {
      if (!p.sent) continue;
      this.settle(
        id,
        undefined,
        new IIIError(
          "invocation_stopped",
          `connection to the engine dropped while ${p.function_id} was in flight; it may or may not have run`,
        ),
      );
    }
    if (!this.stopped && !this.fatal) this.setState(wasConnected || this.state === "connecting" ? "reconnecting" : this.state);
  }

  /** The adapter gave up: calls waiting for a connection (buffered, sent, or in the outbox and
   * awaited) fail with the reason, and so does every later call. The outbox keeps its entries. */
  private onFailed(error: IIIError | undefined): void {
    if (this.stopped) return;
    this.fatal = error ?? new IIIError("not_connected", "gave up connecting to the engine");
    this.stopHeartbeat();
    this.connected = false;
    this.log.error(`cannot connect to the engine: ${this.fatal.message}`, this.fatal);
    for (const [id] of this.pending) this.settle(id, undefined, new IIIError(this.fatal.code, this.fatal.message, { cause: this.fatal }));
    this.buffer = [];
    this.bufferedBytes = 0;
    this.setState("failed");
  }

  private onMessage(raw: string | ArrayBuffer): void {
    this.lastInbound = this.now();
    const parsed = parseEngineFrame(raw);
    if (!parsed.ok) {
      if (!parsed.ignore) this.log.warn(`dropped a frame from the engine: ${parsed.error.message}`);
      return;
    }
    this.handleFrame(parsed.frame);
  }

  private handleFrame(frame: EngineFrame): void {
    switch (frame.type) {
      case "workerregistered":
        this.currentWorkerId = frame.worker_id;
        this.reattachToken = frame.reattach_token;
        return;
      case "invocationresult":
        this.onResult(frame);
        return;
      case "invokefunction": {
        const run = this.onInvoke(frame).finally(() => this.handling.delete(run));
        this.handling.add(run);
        return;
      }
      case "registertrigger":
        void this.onProviderRegister(frame);
        return;
      case "unregistertrigger":
        void this.onProviderUnregister(frame.id, frame.trigger_type);
        return;
      case "triggerregistrationresult":
        if (frame.error)
          this.log.error(`trigger registration failed for "${frame.id}" (${frame.trigger_type}): ${frame.error.message}`, frame.error);
        return;
      case "error":
        this.log.warn(`engine refused a frame: ${frame.error.code}: ${frame.error.message}`);
        return;
      case "ping":
      case "pong":
        return;
    }
  }

  private onResult(frame: InvocationResult): void {
    if (frame.error) {
      const err = IIIError.relayed(frame.error);
      if (frame.error.stacktrace) Object.assign(err, { stacktrace: frame.error.stacktrace });
      this.settle(frame.invocation_id, undefined, err);
    } else {
      this.settle(frame.invocation_id, frame.result ?? undefined);
    }
  }

  private async onInvoke(frame: InvokeFunction): Promise<void> {
    const trace: TraceFields = {};
    if (frame.traceparent) trace.traceparent = frame.traceparent;
    if (frame.baggage) trace.baggage = frame.baggage;
    const answer = (body: { result?: unknown } | { error: ErrorBody }) => {
      if (!frame.invocation_id) {
        if ("error" in body) this.log.error(`${frame.function_id} failed (no result expected): ${body.error.message}`);
        return;
      }
      const out: InvocationResult = {
        type: "invocationresult",
        invocation_id: frame.invocation_id,
        function_id: frame.function_id,
        ...trace,
      };
      if ("error" in body) out.error = body.error;
      else if (body.result !== undefined) out.result = body.result;
      this.reply(out);
    };
    // Shutting down: a call that arrives now is not started (its caller can go elsewhere at once).
    if (this.closing) return answer({ error: { code: "invocation_stopped", message: "the worker is shutting down" } });
    const entry = this.functions.get(frame.function_id);
    if (!entry) return answer({ error: { code: "function_not_found", message: `Function ${frame.function_id} not found` } });
    if (!entry.handler)
      return answer({
        error: { code: "function_not_invokable", message: `${frame.function_id} is HTTP-invoked; the engine calls its URL` },
      });
    answer(await runHandler(entry, frame, trace, this.ambient, (req, fields) => this.call(req, fields)));
  }

  private async onProviderRegister(frame: RegisterTrigger): Promise<void> {
    const entry = this.triggerTypes.get(frame.trigger_type);
    const result: WorkerFrame = {
      type: "triggerregistrationresult",
      id: frame.id,
      trigger_type: frame.trigger_type,
      function_id: frame.function_id,
    };
    if (!entry) {
      this.reply({
        ...result,
        error: { code: "trigger_type_not_found", message: `trigger type ${frame.trigger_type} is not provided by this worker` },
      });
      return;
    }
    try {
      await entry.handler.registerTrigger({
        id: frame.id,
        function_id: frame.function_id,
        config: frame.config ?? null,
        metadata: frame.metadata as Record<string, unknown> | undefined,
      });
      this.reply(result);
    } catch (err) {
      this.reply({ ...result, error: { code: "trigger_registration_failed", message: err instanceof Error ? err.message : String(err) } });
    }
  }

  private async onProviderUnregister(id: string, trigger_type: string | undefined): Promise<void> {
    const entry = trigger_type ? this.triggerTypes.get(trigger_type) : undefined;
    if (!entry) return;
    try {
      // §3.9: the frame carries neither function_id nor config.
      await entry.handler.unregisterTrigger({ id, function_id: "", config: undefined });
    } catch (err) {
      this.log.warn(`unregisterTrigger handler of ${trigger_type} threw`, err);
    }
  }

  /**
   * Close the connection. Handlers already running get up to SHUTDOWN_DRAIN_MS to send their
   * results first (calls arriving meanwhile are answered `invocation_stopped`), so a queued
   * delivery being handled is acknowledged rather than redelivered to a worker that has gone.
   */
  async shutdown(): Promise<void> {
    if (this.stopped || this.closing) return;
    this.closing = true;
    if (this.handling.size > 0 && this.connected) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_DRAIN_MS)));
      await Promise.race([Promise.allSettled([...this.handling]), deadline]);
      if (timer !== undefined) clearTimeout(timer);
    }
    this.stopped = true;
    this.connected = false;
    this.stopHeartbeat();
    for (const [id] of this.pending) this.settle(id, undefined, new IIIError("not_connected", "the client was shut down"));
    this.buffer = [];
    this.bufferedBytes = 0;
    this.link.close();
    this.setState("disconnected");
  }
}

/** Validate, run in the caller's trace context, validate the output, normalise errors. Shared
 * with the edge function host. */
export async function runHandler(
  entry: { handler?: FunctionHandler; input?: Schema; output?: Schema },
  frame: { function_id: string; invocation_id?: string; data?: unknown; metadata?: unknown },
  trace: TraceFields,
  ambient: AmbientTrace,
  call: (req: TriggerRequest<unknown>, fields: TraceFields) => Promise<unknown>,
): Promise<{ result?: unknown } | { error: ErrorBody }> {
  const handler = entry.handler;
  if (!handler) return { error: { code: "function_not_invokable", message: `${frame.function_id} has no handler here` } };
  let data: unknown = frame.data ?? null;
  const caller = callerPrincipalIn(data);
  if (entry.input) {
    const checked = parseInput(frame.function_id, entry.input, data);
    if (!checked.ok) return { error: checked.error };
    data = checked.data;
  }
  const ctx: InvocationContext = {
    function_id: frame.function_id,
    invocation_id: frame.invocation_id,
    metadata: frame.metadata,
    ...trace,
    ...(caller ? { caller } : {}),
    trigger: <TInput, TOutput>(req: TriggerRequest<TInput>) => call(req as TriggerRequest<unknown>, trace) as Promise<TOutput>,
  };
  try {
    let result: unknown = await runInTrace(trace, ambient, () => handler(data, frame.metadata, ctx));
    if (entry.output) {
      const checked = parseOutput(frame.function_id, entry.output, result);
      if (!checked.ok) return { error: checked.error };
      result = checked.data;
    }
    return { result };
  } catch (err) {
    return { error: toErrorBody(err) };
  }
}
