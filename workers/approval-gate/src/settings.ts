// The per-session permission settings (docs/harness-contracts.md §3.7): pure changes to an
// `ApprovalSettings` record, and the read-modify-write that stores one. A session without a
// stored record has the defaults (`manual`, both lists empty); reads never write, the first change
// does.
import { IIIError } from "@iii-edge/protocol";
import {
  APPROVAL_LIST_MAX,
  APPROVAL_SETTINGS_SCOPE,
  defaultApprovalSettings,
  parseApprovalSettings,
  type ApprovalSettings,
  type PermissionMode,
  approvalState,
} from "@iii-edge/protocol/harness";
import type { Trigger } from "@iii-edge/sdk-edge/worker";

/** Compare-and-set attempts before a change gives up: only people's clicks race here. */
export const SETTINGS_CAS_ATTEMPTS = 8;

export type ListName = "always_allow" | "approved_always";

/** One change to a session's settings; `now` stamps what it adds. */
export type SettingsChange =
  | { kind: "mode"; mode: PermissionMode }
  | { kind: "add"; list: ListName; function_id: string }
  | { kind: "remove"; list: ListName; function_id: string };

/** The settings after `change` (a new object; `current` is never mutated). Adding an id the list
 * holds, or removing one it does not, changes nothing. */
export function applyChange(current: ApprovalSettings, change: SettingsChange, now: number): ApprovalSettings {
  const next: ApprovalSettings = {
    mode: current.mode,
    always_allow: [...current.always_allow],
    approved_always: [...current.approved_always],
    mode_set_at: current.mode_set_at,
  };
  if (change.kind === "mode") {
    next.mode = change.mode;
    next.mode_set_at = now;
    return next;
  }
  const list = next[change.list];
  const at = list.findIndex((e) => e.function_id === change.function_id);
  if (change.kind === "add") {
    if (at >= 0) return next;
    if (list.length >= APPROVAL_LIST_MAX)
      throw new IIIError("invalid_arguments", `${change.list} holds ${APPROVAL_LIST_MAX} entries already; remove one first`);
    list.push({ function_id: change.function_id, granted_at: now, granted_by: "user_click" });
  } else if (at >= 0) list.splice(at, 1);
  return next;
}

const errorCode = (e: unknown): unknown => (e && typeof e === "object" ? (e as { code?: unknown }).code : undefined);

/** The stored record of `sid`, and its raw value for a compare-and-set (null when absent). */
export async function readSettings(trigger: Trigger, sid: string): Promise<{ stored: ApprovalSettings | undefined; raw: unknown }> {
  const raw = await trigger<unknown, unknown>({ function_id: "state::get", payload: approvalState.settings(sid) });
  if (raw === undefined || raw === null) return { stored: undefined, raw: null };
  const stored = parseApprovalSettings(raw);
  // A record nobody can read is refused rather than silently replaced by the defaults.
  if (!stored) throw new IIIError("invalid_state", `${APPROVAL_SETTINGS_SCOPE}/${sid} is unreadable`);
  return { stored, raw };
}

/** Apply `change` to the stored settings of `sid` (the defaults when there are none), with
 * compare-and-set, so two people changing one session at once both land. */
export async function changeSettings(trigger: Trigger, sid: string, change: SettingsChange, now: () => number): Promise<ApprovalSettings> {
  for (let attempt = 0; attempt < SETTINGS_CAS_ATTEMPTS; attempt++) {
    const { stored, raw } = await readSettings(trigger, sid);
    const next = applyChange(stored ?? defaultApprovalSettings(), change, now());
    try {
      await trigger({
        function_id: "state::update",
        payload: { ...approvalState.settings(sid), ops: [{ type: "set", path: "", value: next }], expected: raw ?? null },
      });
      return next;
    } catch (e) {
      if (errorCode(e) !== "state_conflict") throw e;
    }
  }
  throw new IIIError("state_conflict", `${APPROVAL_SETTINGS_SCOPE}/${sid} kept changing under this write; try again`);
}
