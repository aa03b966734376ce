// Sessions have owners (protocol's auth.ts): every function of this worker reads or changes one
// session, so every one asks the engine to be told who calls (`caller_principal` metadata) and
// checks the caller against the session's owner before it runs. Trusted code of this deployment
// (the orchestrator in the Worker: no principal) may use any session. A copy (fork, clone) belongs
// to the principal that made it, else to its source's owner.
import { IIIError, assertSessionAccess, claimSessionOwner, isRecord, mayUseSession, sessionOwner } from "@iii-edge/protocol";
import type { CallerPrincipal, OwnerLookup } from "@iii-edge/protocol";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import type { WorkerFunctionOptions, WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";

/** Functions whose request names no session and that decide for themselves (listings). */
const UNSCOPED = new Set(["session-tree::list"]);
/** Functions that make a new session from `source_session_id`. */
const COPIES = new Set(["session-tree::fork", "session-tree::clone"]);

const text = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export interface OwnerHooks {
  /** Record the owner in this worker's own table (listings). */
  setOwner(sessionId: string, owner: string): Promise<void>;
}

const lookup =
  (ctx: InvocationContext): OwnerLookup =>
  (req) =>
    ctx.trigger(req);

/** Before the handler: the caller must be allowed the session the request names. */
async function admit(id: string, data: unknown, ctx: InvocationContext): Promise<void> {
  if (UNSCOPED.has(id) || !isRecord(data)) return;
  const sid = COPIES.has(id) ? text(data.source_session_id) : text(data.session_id);
  if (sid === undefined) return; // the handler's own parse refuses it
  const caller = ctx.caller;
  if (id === "session-tree::ensure") {
    // Creating a session makes it the caller's; `owner` may be named only for oneself (trusted
    // code names the owner its run recorded).
    const named = text(data.owner);
    if (caller && named !== undefined && named !== caller.sub)
      throw new IIIError("forbidden", `'${caller.sub}' may not create a session for '${named}'`);
    if (caller) {
      const stands = await claimSessionOwner(lookup(ctx), sid, caller.sub);
      if (!mayUseSession(caller, sid, stands)) throw new IIIError("forbidden", `session ${sid} is not one '${caller.sub}' may use`);
    }
    return;
  }
  await assertSessionAccess(lookup(ctx), caller, sid);
}

/** After a copy was made: it is the caller's (or its source's owner's). */
async function ownCopy(data: unknown, result: unknown, ctx: InvocationContext, hooks: OwnerHooks): Promise<void> {
  const copy = isRecord(result) ? text(result.session_id) : undefined;
  const source = isRecord(data) ? text(data.source_session_id) : undefined;
  if (!copy || !source) return;
  const caller: CallerPrincipal | undefined = ctx.caller;
  const want = caller?.sub ?? (await sessionOwner(lookup(ctx), source));
  if (want === undefined) return;
  const stands = await claimSessionOwner(lookup(ctx), copy, want);
  await hooks.setOwner(copy, stands);
  if (!mayUseSession(caller, copy, stands)) throw new IIIError("forbidden", `session ${copy} is not one '${caller!.sub}' may use`);
}

/** `iii` whose registrations check the caller against the session's owner first. */
export function ownerChecked(iii: WorkerSurface, hooks: OwnerHooks): WorkerSurface {
  const registerFunction = (id: string, handler: WorkerHandler, options?: WorkerFunctionOptions): void => {
    const checked: WorkerHandler = async (data, ctx) => {
      await admit(id, data, ctx);
      const result = await handler(data, ctx);
      if (COPIES.has(id)) await ownCopy(data, result, ctx, hooks);
      return result;
    };
    iii.registerFunction(id, checked, { ...options, metadata: { ...options?.metadata, caller_principal: true } });
  };
  return {
    get runtime() {
      return iii.runtime;
    },
    get channels() {
      return iii.channels;
    },
    get env() {
      return iii.env;
    },
    get tracer() {
      return iii.tracer;
    },
    registerFunction,
    registerTrigger: (t) => iii.registerTrigger(t),
    trigger: (req) => iii.trigger(req),
  };
}
