// Isolation (docs/harness-contracts.md §1.3): a run that asks for it gets a sandbox from the sandbox host
// (workers/sandbox-host: `sandbox::create|list|stop`), reused when the run request still names a live one.
import { IIIError, isRecord, errorCode } from "@iii-edge/protocol";
import type { Trigger } from "./catalog.ts";

/** `sandbox::create` boots a microVM: seconds on a warm pool, longer under TCG when cold (spec: 300 s). */
export const SANDBOX_CREATE_TIMEOUT_MS = 300_000;
/** `sandbox::stop` on release (spec: 60 s); best effort. */
export const SANDBOX_STOP_TIMEOUT_MS = 60_000;
/** `sandbox::list` when checking whether a stored sandbox is still there. */
export const SANDBOX_LIST_TIMEOUT_MS = 10_000;

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Is `sandboxId` still listed by the host? Any failure counts as "no": a fresh one is made. */
async function stillRunning(trigger: Trigger, sandboxId: string): Promise<boolean> {
  try {
    const res = await trigger<{ sandboxes?: unknown }>("sandbox::list", {}, SANDBOX_LIST_TIMEOUT_MS);
    return Array.isArray(res?.sandboxes) && res.sandboxes.some((s) => isRecord(s) && s.sandbox_id === sandboxId);
  } catch {
    return false;
  }
}

/** The run's sandbox: the stored one if it still runs, else a new one. Failure is `sandbox_unavailable`. */
export async function acquireSandbox(trigger: Trigger, sessionId: string, reuse: string | null | undefined): Promise<string> {
  if (reuse && (await stillRunning(trigger, reuse))) return reuse;
  let res: unknown;
  try {
    // The host's defaults (busybox image, 256 MB, idle timeout 300 s) are the run's; its schema
    // refuses unknown fields, so nothing else is sent.
    res = await trigger<unknown>("sandbox::create", {}, SANDBOX_CREATE_TIMEOUT_MS);
  } catch (err) {
    const code = errorCode(err);
    if (code === "function_not_found") {
      throw new IIIError(
        "sandbox_unavailable",
        `session ${sessionId} asked for isolation, but no sandbox host is connected (sandbox::create is not registered; start one with npm run sandbox-host)`,
      );
    }
    throw new IIIError(
      "sandbox_unavailable",
      `session ${sessionId} asked for isolation, but sandbox::create failed${code ? ` (${code})` : ""}: ${messageOf(err)}`,
    );
  }
  if (!isRecord(res) || typeof res.sandbox_id !== "string" || res.sandbox_id === "") {
    throw new IIIError(
      "sandbox_unavailable",
      `session ${sessionId} asked for isolation, but sandbox::create answered without a sandbox_id`,
    );
  }
  return res.sandbox_id;
}

/** Stop a sandbox, best effort: true when the host confirmed. */
export async function releaseSandbox(trigger: Trigger, sandboxId: string): Promise<boolean> {
  try {
    await trigger<unknown>("sandbox::stop", { sandbox_id: sandboxId }, SANDBOX_STOP_TIMEOUT_MS);
    return true;
  } catch {
    return false;
  }
}
