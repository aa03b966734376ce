// The engine-core half of iii's RBAC worker listener (protocol/src/rbac.ts; the front door is
// ../rbac.ts). A connection accepted on the listener carries a session: the auth function's answer
// and the listener's configuration. Every frame it sends that registers, binds or calls comes here
// first, in the order sent (a hook answers asynchronously, and a call must not overtake the
// registration before it):
// - a call is checked against the session (forbidden, allowed, infrastructure, expose_functions);
//   a refusal is iii's FORBIDDEN. With a middleware function configured, a call to anything but an
//   engine built-in goes to the middleware with the caller's context instead, and its answer is the
//   call's answer. `engine::functions::list` answers only what the connection may call.
// - a registration goes through its hook (refuse or rewrite), then gets the session's prefix; what
//   is left is an ordinary registration, under every rule of the engine (ownership, quotas).
// - a binding may only call a function the connection may call, or one in its own prefix.
// Sessions and renamed ids live in SQLite, so a hibernated object wakes up enforcing the same rules.
import {
  RBAC_CLOSED_SESSION,
  RBAC_FORBIDDEN_CODE,
  onFunctionRegistrationResult,
  onTriggerRegistrationResult,
  onTriggerTypeRegistrationResult,
  rbacForbiddenMessage,
  rbacMayCall,
  rbacPatternMatches,
  rbacSessionSchema,
  type ErrorBody,
  type Grant,
  type InvokeFunction,
  type OnFunctionRegistrationInput,
  type OnTriggerRegistrationInput,
  type OnTriggerTypeRegistrationInput,
  type RbacMiddlewareInput,
  type RbacSession,
  type RegisterFunction,
  type RegisterTrigger,
  type WorkerFrame,
  isRecord,
} from "@iii-edge/protocol";
import type { CallRequest } from "./api.ts";
import type { CallOutcome, Conn, EnginePorts } from "./ports.ts";

/** A hook answers within this, or the registration is refused (fail closed). */
const RBAC_HOOK_TIMEOUT_MS = 5_000;
/** Longest id a prefix may produce: what a registerfunction frame may carry. */
const MAX_FUNCTION_ID_CHARS = 512;
/** The function whose listing is narrowed to what the connection may call. */
const FUNCTIONS_LIST = "engine::functions::list";

/** What the listener needs of the engine core (EngineCore builds it from its own methods). */
export interface RbacHost {
  /** Handle a frame as from any other connection. */
  handle(conn: Conn, f: WorkerFrame): void;
  invoke(req: CallRequest): Promise<CallOutcome>;
  reply(conn: Conn, invocationId: string, functionId: string, outcome: CallOutcome): void;
  isConnected(workerId: string): boolean;
  grantOf(workerId: string): Grant;
  isBuiltin(functionId: string): boolean;
  /** Owner and registration metadata of a registered function. */
  functionOf(functionId: string): { owner: string; metadata?: Record<string, unknown> } | undefined;
}

/** The frames the listener looks at; the rest (results, pings, reattach) go straight to the core. */
const GOVERNED = new Set<WorkerFrame["type"]>([
  "registerfunction",
  "unregisterfunction",
  "registertriggertype",
  "unregistertriggertype",
  "registertrigger",
  "unregistertrigger",
  "invokefunction",
]);

export class RbacConnections {
  private readonly ports: EnginePorts;
  private host: RbacHost | undefined;
  private readonly sessions = new Map<string, RbacSession>();
  /** A function registered under another id than its worker knows it by (prefix, hook): the id the
   * worker is sent in its invokefunction frames, and who registered it. */
  private readonly names = new Map<string, { worker: string; local: string }>();
  /** Each connection's frames, one after another. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(ports: EnginePorts) {
    this.ports = ports;
    for (const r of ports.sql.exec<{ worker_id: string; session: string }>("SELECT worker_id, session FROM rbac_sessions")) {
      // A row that no longer parses still governs its connection: by allowing nothing.
      const s = rbacSessionSchema.safeParse(parseJson(r.session));
      this.sessions.set(r.worker_id, s.success ? s.data : RBAC_CLOSED_SESSION);
    }
    for (const r of ports.sql.exec<{ function_id: string; worker_id: string; local_id: string }>(
      "SELECT function_id, worker_id, local_id FROM rbac_names",
    )) {
      this.names.set(r.function_id, { worker: r.worker_id, local: r.local_id });
    }
  }

  attach(host: RbacHost): void {
    this.host = host;
  }

  /** A connection accepted on the listener. */
  open(workerId: string, session: RbacSession): void {
    this.sessions.set(workerId, session);
    this.ports.sql.exec("INSERT OR REPLACE INTO rbac_sessions (worker_id, session) VALUES (?, ?)", workerId, JSON.stringify(session));
  }

  /** The connection is gone: its session and renamed ids with it. */
  close(workerId: string): void {
    this.chains.delete(workerId);
    if (!this.sessions.delete(workerId)) return;
    for (const [id, n] of this.names) if (n.worker === workerId) this.names.delete(id);
    this.ports.sql.exec("DELETE FROM rbac_sessions WHERE worker_id = ?", workerId);
    this.ports.sql.exec("DELETE FROM rbac_names WHERE worker_id = ?", workerId);
  }

  /** On wake: sessions of connections that did not survive are dropped. */
  retain(isLive: (workerId: string) => boolean): void {
    for (const id of [...this.sessions.keys()]) if (!isLive(id)) this.close(id);
  }

  sessionOf(workerId: string): RbacSession | undefined {
    return this.sessions.get(workerId);
  }

  /** The id a worker is called by in its invokefunction frames: the one it registered. */
  wireName(functionId: string, owner: string): string {
    const n = this.names.get(functionId);
    return n && n.worker === owner ? n.local : functionId;
  }

  /** Take the frame when it comes from a listener connection and is one the session governs. */
  takes(conn: Conn, f: WorkerFrame): boolean {
    const s = this.sessions.get(conn.workerId);
    if (!s || !this.host || !GOVERNED.has(f.type)) return false;
    const host = this.host;
    const prev = this.chains.get(conn.workerId) ?? Promise.resolve();
    const next = prev
      .then(() => this.process(host, conn, s, f))
      .catch((e) => {
        // A frame must never stop the ones after it; the sender learns what went wrong.
        conn.send({ type: "error", error: { code: "invalid_frame", message: e instanceof Error ? e.message : String(e) } });
      });
    this.chains.set(conn.workerId, next);
    return true;
  }

  private async process(host: RbacHost, conn: Conn, s: RbacSession, f: WorkerFrame): Promise<void> {
    if (!host.isConnected(conn.workerId)) return;
    switch (f.type) {
      case "invokefunction":
        return this.call(host, conn, s, f);
      case "registerfunction":
        return this.registerFunction(host, conn, s, f);
      case "unregisterfunction": {
        const registered = this.registeredId(conn.workerId, f.id);
        if (registered !== f.id) this.forget(registered);
        return host.handle(conn, { ...f, id: registered });
      }
      case "registertriggertype": {
        if (!s.allow_trigger_type_registration) return refuseFrame(conn, `this connection may not register trigger types (${f.id})`);
        let description = f.description;
        const hook = s.config.on_trigger_type_registration_function_id;
        if (hook) {
          const input: OnTriggerTypeRegistrationInput = { trigger_type_id: f.id, context: s.context };
          if (f.description !== undefined) input.description = f.description;
          const answer = await this.ask(host, conn, hook, input, onTriggerTypeRegistrationResult);
          if (!answer.ok) return refuseFrame(conn, `trigger type ${f.id}: ${answer.message}`);
          if (answer.value !== true) {
            // Its worker knows the type by the id it sent, and would not recognise bindings of another.
            if (answer.value.trigger_type_id && answer.value.trigger_type_id !== f.id)
              return refuseFrame(conn, `trigger type ${f.id}: the hook renamed it, which this engine does not support`);
            if (typeof answer.value.description === "string") description = answer.value.description;
          }
        }
        if (!host.isConnected(conn.workerId)) return;
        return host.handle(conn, description === undefined ? f : { ...f, description });
      }
      case "registertrigger":
        return this.registerTrigger(host, conn, s, f);
      default:
        return host.handle(conn, f);
    }
  }

  private async call(host: RbacHost, conn: Conn, s: RbacSession, f: InvokeFunction): Promise<void> {
    const expectsReply = !!f.invocation_id && f.action?.type !== "void";
    const answer = (outcome: CallOutcome) => {
      if (expectsReply) host.reply(conn, f.invocation_id!, f.function_id, outcome);
      else if (!outcome.ok) conn.send({ type: "error", error: outcome.error });
    };
    // A listener connection stays in the namespace it was accepted for.
    const elsewhere = f.namespace !== undefined && f.namespace !== this.ports.namespace;
    if (elsewhere || !rbacMayCall(s, f.function_id, host.functionOf(f.function_id)?.metadata)) {
      return answer({ ok: false, error: { code: RBAC_FORBIDDEN_CODE, message: rbacForbiddenMessage(f.function_id) } });
    }
    const middleware = s.config.middleware_function_id;
    if (middleware && !host.isBuiltin(f.function_id)) {
      // The payload as the caller sent it, less any caller id it claims (the engine stamps that).
      const payload = isRecord(f.data)
        ? Object.fromEntries(Object.entries(f.data).filter(([k]) => k !== "_caller_worker_id"))
        : (f.data ?? null);
      const input: RbacMiddlewareInput = { function_id: f.function_id, payload, context: s.context };
      if (f.action) input.action = f.action;
      const call = host.invoke({
        function_id: middleware,
        data: input,
        callerWorkerId: conn.workerId,
        caller: conn.workerId,
        timeoutMs: f.timeout_ms,
        traceparent: f.traceparent,
        baggage: f.baggage,
      });
      if (!expectsReply) {
        this.ports.background(call.then((o) => answer(o)));
        return;
      }
      answer(await call);
      return;
    }
    if (f.function_id === FUNCTIONS_LIST && expectsReply) {
      const out = await host.invoke({
        function_id: f.function_id,
        data: f.data ?? null,
        callerWorkerId: conn.workerId,
        caller: conn.workerId,
        grant: host.grantOf(conn.workerId),
        timeoutMs: f.timeout_ms,
      });
      if (out.ok && isRecord(out.result) && Array.isArray(out.result.functions)) {
        const visible = out.result.functions.filter(
          (e) =>
            isRecord(e) &&
            typeof e.function_id === "string" &&
            rbacMayCall(s, e.function_id, isRecord(e.metadata) ? e.metadata : undefined),
        );
        const hidden = out.result.functions.length - visible.length;
        const total = typeof out.result.total === "number" ? out.result.total - hidden : visible.length;
        return answer({ ok: true, result: { ...out.result, functions: visible, total } });
      }
      return answer(out);
    }
    host.handle(conn, f);
  }

  private async registerFunction(host: RbacHost, conn: Conn, s: RbacSession, f: RegisterFunction): Promise<void> {
    if (!s.allow_function_registration) return refuseFrame(conn, `this connection may not register functions (${f.id})`);
    let id = f.id;
    let description = f.description;
    let metadata = f.metadata;
    const hook = s.config.on_function_registration_function_id;
    if (hook) {
      const input: OnFunctionRegistrationInput = { function_id: f.id, context: s.context };
      if (f.description !== undefined) input.description = f.description;
      if (f.metadata !== undefined) input.metadata = f.metadata;
      const answer = await this.ask(host, conn, hook, input, onFunctionRegistrationResult);
      if (!answer.ok) return refuseFrame(conn, `function ${f.id}: ${answer.message}`);
      if (answer.value !== true) {
        if (answer.value.function_id) id = answer.value.function_id;
        if (typeof answer.value.description === "string") description = answer.value.description;
        if (answer.value.metadata) metadata = answer.value.metadata;
      }
    }
    if (s.function_registration_prefix) id = `${s.function_registration_prefix}::${id}`;
    if (id.length > MAX_FUNCTION_ID_CHARS)
      return refuseFrame(conn, `function ${f.id}: with its prefix the id is longer than ${MAX_FUNCTION_ID_CHARS} characters`);
    if (!host.isConnected(conn.workerId)) return;
    const frame: RegisterFunction = { ...f, id };
    if (description === undefined) delete frame.description;
    else frame.description = description;
    if (metadata === undefined) delete frame.metadata;
    else frame.metadata = metadata;
    host.handle(conn, frame);
    // Remembered only when the registration took (the core may refuse it: an id someone else holds).
    if (id !== f.id && host.functionOf(id)?.owner === conn.workerId) {
      this.names.set(id, { worker: conn.workerId, local: f.id });
      this.ports.sql.exec("INSERT OR REPLACE INTO rbac_names (function_id, worker_id, local_id) VALUES (?, ?, ?)", id, conn.workerId, f.id);
    }
  }

  private async registerTrigger(host: RbacHost, conn: Conn, s: RbacSession, f: RegisterTrigger): Promise<void> {
    const refuse = (error: ErrorBody) => {
      conn.send({ type: "triggerregistrationresult", id: f.id, trigger_type: f.trigger_type, function_id: f.function_id, error });
    };
    if (s.allowed_trigger_types && !s.allowed_trigger_types.some((p) => rbacPatternMatches(p, f.trigger_type))) {
      return refuse({ code: "forbidden", message: `this connection may not bind trigger type ${f.trigger_type}` });
    }
    let functionId = f.function_id;
    let config = f.config;
    const hook = s.config.on_trigger_registration_function_id;
    if (hook) {
      const input: OnTriggerRegistrationInput = {
        trigger_id: f.id,
        trigger_type: f.trigger_type,
        function_id: f.function_id,
        config: f.config ?? null,
        context: s.context,
      };
      const answer = await this.ask(host, conn, hook, input, onTriggerRegistrationResult);
      if (!answer.ok) return refuse({ code: "forbidden", message: `trigger ${f.id}: ${answer.message}` });
      if (answer.value !== true) {
        // Its worker knows the binding by the id and type it sent (to unregister it, to be told of it).
        const renamed =
          (answer.value.trigger_id && answer.value.trigger_id !== f.id) ||
          (answer.value.trigger_type && answer.value.trigger_type !== f.trigger_type);
        if (renamed)
          return refuse({
            code: "forbidden",
            message: `trigger ${f.id}: the hook renamed it or changed its type, which this engine does not support`,
          });
        if (answer.value.function_id) functionId = answer.value.function_id;
        if (answer.value.config !== undefined && answer.value.config !== null) config = answer.value.config;
      }
    }
    const prefix = s.function_registration_prefix;
    if (prefix) functionId = `${prefix}::${functionId}`;
    // A binding calls its function with the engine's hand: only one this connection may call, or
    // one of its own (under its prefix, registered or not yet).
    const target = host.functionOf(functionId);
    const own = target?.owner === conn.workerId || (!!prefix && functionId.startsWith(`${prefix}::`));
    if (!own && !rbacMayCall(s, functionId, target?.metadata))
      return refuse({ code: "forbidden", message: `this connection may not call ${functionId}, so it may not bind it` });
    if (!host.isConnected(conn.workerId)) return;
    host.handle(conn, { ...f, function_id: functionId, config });
  }

  /** Call a hook; anything but an answer that allows (a throw, a failure, `false`, null) refuses. */
  private async ask<T>(
    host: RbacHost,
    conn: Conn,
    hook: string,
    input: unknown,
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  ): Promise<{ ok: true; value: T } | { ok: false; message: string }> {
    const out = await host.invoke({ function_id: hook, data: input, callerWorkerId: conn.workerId, timeoutMs: RBAC_HOOK_TIMEOUT_MS });
    if (!out.ok) return { ok: false, message: `refused by ${hook} (${out.error.code}: ${out.error.message.slice(0, 300)})` };
    const parsed = schema.safeParse(out.result);
    if (!parsed.success) return { ok: false, message: `refused by ${hook}` };
    return { ok: true, value: parsed.data };
  }

  /** The id a connection's function is registered under, from the id the worker knows it by. */
  private registeredId(workerId: string, local: string): string {
    for (const [id, n] of this.names) if (n.worker === workerId && n.local === local) return id;
    return local;
  }

  private forget(functionId: string): void {
    this.names.delete(functionId);
    this.ports.sql.exec("DELETE FROM rbac_names WHERE function_id = ?", functionId);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function refuseFrame(conn: Conn, message: string): void {
  conn.send({ type: "error", error: { code: "forbidden", message } });
}
