// One compaction (and one prune) per session at a time (docs/harness-contracts.md §6.1 "Lease"): a `{nonce,
// ts}` value in state scope `compaction_lease` / `prune_lease`, key session id, taken by
// compare-and-set — `state::update` with `expected` is atomic in the engine, so of two takers
// exactly one wins (no read-then-restore dance is needed). A lease older than LEASE_TTL_MS is dead
// (its holder crashed) and may be taken over; release only clears our own value.
import { compareAndSet } from "@iii-edge/sdk-edge/worker";
import { call, STORAGE_TIMEOUT_MS, type Trigger } from "./calls.ts";

export const COMPACTION_LEASE_SCOPE = "compaction_lease";
export const PRUNE_LEASE_SCOPE = "prune_lease";
/** A compaction (two summariser calls of 120 s at most, a few storage round trips) ends well inside. */
export const LEASE_TTL_MS = 300_000;
/** compact_now's wait: 50 ms doubling to 500 ms between tries: quick when the
 * holder is nearly done, no busy loop when it is not. */
export const LEASE_BACKOFF_START_MS = 50;
export const LEASE_BACKOFF_MAX_MS = 500;

interface LeaseValue {
  nonce: string;
  ts: number;
}
const isLive = (v: unknown, now: number): v is LeaseValue =>
  !!v &&
  typeof v === "object" &&
  typeof (v as LeaseValue).nonce === "string" &&
  typeof (v as LeaseValue).ts === "number" &&
  now - (v as LeaseValue).ts < LEASE_TTL_MS;

export interface Lease {
  release(): Promise<void>;
}

export interface LeaseDeps {
  now?: () => number;
  nonce?: () => string;
  sleep?: (ms: number) => Promise<void>;
}

/** Take the lease now, or answer undefined when someone holds it. */
export async function tryLease(trigger: Trigger, scope: string, sid: string, deps: LeaseDeps = {}): Promise<Lease | undefined> {
  const now = (deps.now ?? Date.now)();
  const current = await call<unknown>(trigger, "state::get", { scope, key: sid });
  if (isLive(current, now)) return undefined;
  const mine: LeaseValue = { nonce: (deps.nonce ?? (() => crypto.randomUUID()))(), ts: now };
  const ref = { scope, key: sid };
  if (!(await compareAndSet(trigger, ref, mine, current, { timeoutMs: STORAGE_TIMEOUT_MS })).written) return undefined;
  return {
    async release() {
      // Lost: someone took it over after it went stale, and it is theirs now.
      await compareAndSet(trigger, ref, null, mine, { timeoutMs: STORAGE_TIMEOUT_MS }).catch((e: unknown) =>
        console.warn(`context-compaction: releasing ${scope}/${sid} failed: ${String(e)}`),
      );
    },
  };
}

/** Take the lease, waiting up to `timeoutMs` for its holder; undefined when it stayed held. */
export async function waitLease(
  trigger: Trigger,
  scope: string,
  sid: string,
  timeoutMs: number,
  deps: LeaseDeps = {},
): Promise<Lease | undefined> {
  const now = deps.now ?? Date.now;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const deadline = now() + timeoutMs;
  let wait = LEASE_BACKOFF_START_MS;
  for (;;) {
    const lease = await tryLease(trigger, scope, sid, deps);
    if (lease) return lease;
    const left = deadline - now();
    if (left <= 0) return undefined;
    await sleep(Math.min(wait, left));
    wait = Math.min(wait * 2, LEASE_BACKOFF_MAX_MS);
  }
}
