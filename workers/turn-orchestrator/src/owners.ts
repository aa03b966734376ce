// Sessions have owners: the principal that started a session owns it, a sub-agent's session
// belongs to its parent's owner, a fork to whoever forked it. Every function here that reads or
// changes a session asks the engine to be told who calls (`caller_principal` metadata) and checks
// the caller against the owner recorded in `session_owner/<sid>` (protocol's auth.ts), or against a
// `sessions` grant naming the session. Trusted code of this deployment (no principal) may act on any.
import { IIIError, assertSessionAccess, claimSessionOwner, mayUseSession, sessionOwner } from "@iii-edge/protocol";
import type { CallerPrincipal, OwnerLookup } from "@iii-edge/protocol";
import type { SubAgentParentLink } from "@iii-edge/protocol/harness";
import type { Trigger } from "./calls.ts";

/** Registration metadata of every function that checks the caller against a session's owner. */
export const OWNER_CHECKED = { caller_principal: true } as const;

const lookup =
  (trigger: Trigger): OwnerLookup =>
  (req) =>
    trigger(req);

const refused = (sid: string, caller: CallerPrincipal): IIIError =>
  new IIIError("forbidden", `session ${sid} is not one '${caller.sub}' may use`);

/** Refuse the caller a session it may not use (the same answer whether it exists or not). */
export function checkSession(trigger: Trigger, caller: CallerPrincipal | undefined, sid: string): Promise<void> {
  return assertSessionAccess(lookup(trigger), caller, sid);
}

/**
 * A run is about to start on `sid`: the caller must be allowed the session, and a session nobody
 * owns yet (`fresh`: no run ever claimed it) becomes the caller's — or, for a sub-agent, its
 * parent's owner's. Answers the owner that stands (undefined: trusted code started an unowned one).
 */
export async function ownForRun(
  trigger: Trigger,
  caller: CallerPrincipal | undefined,
  sid: string,
  fresh: boolean,
  parent?: SubAgentParentLink,
): Promise<string | undefined> {
  const call = lookup(trigger);
  const owner = await sessionOwner(call, sid);
  if (owner !== undefined) {
    if (!mayUseSession(caller, sid, owner)) throw refused(sid, caller!);
    return owner;
  }
  // An unowned session that already ran (trusted code started it) is not up for the taking.
  if (!fresh && !mayUseSession(caller, sid, undefined)) throw refused(sid, caller!);
  let want = caller?.sub;
  if (parent) {
    await assertSessionAccess(call, caller, parent.session_id);
    want = (await sessionOwner(call, parent.session_id)) ?? want;
  }
  if (want === undefined) return undefined;
  const stands = await claimSessionOwner(call, sid, want);
  // Another start claimed it first.
  if (!mayUseSession(caller, sid, stands)) throw refused(sid, caller!);
  return stands;
}

/** A copy of `source` (fork) made for `caller`: it owns the copy, else the source's owner does. */
export async function ownCopy(trigger: Trigger, caller: CallerPrincipal | undefined, source: string, copy: string): Promise<void> {
  const call = lookup(trigger);
  const want = caller?.sub ?? (await sessionOwner(call, source));
  if (want === undefined) return;
  const stands = await claimSessionOwner(call, copy, want);
  if (!mayUseSession(caller, copy, stands)) throw refused(copy, caller!);
}
