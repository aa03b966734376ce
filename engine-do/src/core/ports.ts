// The engine core talks to the world only through these small interfaces. The Durable Object
// shell implements them over workerd (../object/config.ts); tests may implement them in Node.
import type { CallOutcome, EdgeHost, EngineFrame, EngineRpc, HttpInvocation } from "@iii-edge/protocol";

/** Protocol's (rpc.ts), re-exported for the core files that take it from here with the ports. */
export type { CallOutcome } from "@iii-edge/protocol";

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

/** A call's W3C trace context, as the frame (or the HTTP request) carried it. */
export interface TraceContext {
  traceparent?: string;
  baggage?: string;
}

export interface HttpFunctionPort {
  /** One call; `trace` goes out as the W3C `traceparent` / `baggage` headers. */
  invoke(fn: { id: string; invocation: HttpInvocation }, data: unknown, invocationId: string, trace?: TraceContext): Promise<CallOutcome>;
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
  otherNamespace?(namespace: string): EngineRpc;
  httpFunctions?: HttpFunctionPort;
}
