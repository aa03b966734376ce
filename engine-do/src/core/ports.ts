// The engine core talks to the world only through these small interfaces. The Durable Object
// shell (../engine-object.ts) implements them over workerd; tests may implement them in Node.
import type { EngineFrame, ErrorBody, Grant, HttpInvocation } from "@iii-edge/protocol";

/** A live worker connection. `send` returns false when the socket is gone, and "too_large" (sending
 * nothing) when the frame is over MAX_FRAME_BYTES. */
export interface Conn {
  readonly workerId: string;
  send(frame: EngineFrame): boolean | "too_large";
  close(code: number, reason: string): void;
}

export type SqlValue = string | number | null | ArrayBuffer;
/** Synchronous SQL, as DO SQLite offers it (`ctx.storage.sql.exec(...).toArray()`). */
export interface Sql {
  exec<T = Record<string, SqlValue>>(query: string, ...bindings: SqlValue[]): T[];
  /** Run `fn` atomically (DO: `ctx.storage.transactionSync`). */
  transaction<T>(fn: () => T): T;
}

export interface Clock {
  now(): number;
}

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** The object's single alarm, multiplexed by the core (cron, queues, deadlines). */
export interface AlarmPort {
  /** Ask for `alarm()` at or before `at` (ms since epoch). */
  request(at: number): void;
}

export interface RemoteTrigger {
  function_id: string;
  payload?: unknown;
  action?: { type: "void" } | { type: "enqueue"; queue: string; idempotency_key?: string };
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
  timeout_ms?: number;
  /** The caller's permissions, checked by the target namespace too. */
  grant?: Grant;
  /** Who called (`<namespace>/<worker id>`), stamped into `_caller_worker_id` by the target. */
  caller?: string;
}

export type CallOutcome = { ok: true; result?: unknown } | { ok: false; error: ErrorBody };

/** A Worker reached by service binding that hosts functions (sdk-edge FunctionHost). */
export interface EdgeHost {
  iiiManifest(): Promise<EdgeManifest>;
  iiiInvoke(req: {
    function_id: string;
    data: unknown;
    metadata?: unknown;
    invocation_id: string;
    traceparent?: string;
    baggage?: string;
    /** The namespace whose engine invokes it: the host calls back into the same one. */
    namespace?: string;
  }): Promise<{ result?: unknown } | { error: ErrorBody }>;
}
export interface EdgeManifest {
  functions: { id: string; description?: string; request_format?: unknown; response_format?: unknown; metadata?: Record<string, unknown> }[];
  triggers: { id: string; trigger_type: string; function_id: string; config?: unknown; metadata?: unknown }[];
}

export interface HttpFunctionPort {
  invoke(fn: { id: string; invocation: HttpInvocation }, data: unknown, invocationId: string): Promise<CallOutcome>;
  /** Check the URL policy and that the auth secrets it names exist, at registration. */
  validate(invocation: HttpInvocation): { ok: true } | { ok: false; message: string };
}

export interface Log {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

export interface EnginePorts {
  namespace: string;
  sql: Sql;
  clock: Clock;
  timers: Timers;
  alarm: AlarmPort;
  log: Log;
  newId(): string;
  /** Run work after the current event without blocking it (DO: ctx.waitUntil or plain promise). */
  background(p: Promise<unknown>): void;
  edgeHosts: Record<string, EdgeHost>;
  /** Another namespace's engine (DO → DO by RPC stub), for cross-namespace calls. */
  otherNamespace?(namespace: string): { trigger(req: RemoteTrigger): Promise<CallOutcome> };
  httpFunctions?: HttpFunctionPort;
}
