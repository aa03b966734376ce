// Engine-side bounds on what one caller, one target or one principal can hold open. Each is a
// named constant with the reason for its number; hitting one answers the caller at once with a
// typed error and leaves everyone else alone.

/** Calls one connection (or one HTTP principal) may have waiting at once. A well-behaved worker
 * pipelines far fewer; 10,000 never-answered calls used to take the whole object down. */
export const MAX_OPEN_CALLS_PER_CALLER = 1_000;
/** Calls one target worker may be asked to run at once: a hung worker collects at most this many. */
export const MAX_OPEN_CALLS_PER_TARGET = 2_000;
/** Calls open in one engine object in total: bounds the routing table's memory (~1 KiB each).
 * The last guard: the shares below keep any one principal, and principals together, under it. */
export const MAX_OPEN_CALLS = 20_000;
/** Calls one principal (token `sub`), over all its connections and HTTP calls, may have open in one
 * engine object: a quarter of MAX_OPEN_CALLS. Five connections' worth of MAX_OPEN_CALLS_PER_CALLER
 * is room for a fleet of one user's processes, and a principal at its cap still leaves three
 * quarters of the table to everyone else (before, 22 sockets of one token filled all of it). A trigger
 * fire counts against the principal whose binding it is. */
export const MAX_OPEN_CALLS_PER_PRINCIPAL = MAX_OPEN_CALLS / 4;
/** Open calls kept for trusted callers only: the engine's own trigger fires of edge-hosted bindings
 * and Worker-hosted code calling back without a grant (the agent harness serving `POST /api/turns`).
 * Principals together hold at most MAX_OPEN_CALLS minus this, so however many of them fill their
 * shares, the harness still starts and runs turns. */
export const TRUSTED_OPEN_CALLS_RESERVE = MAX_OPEN_CALLS / 4;

/** The open-call bounds an engine object runs with: these defaults, or lower ones a deployment sets
 * (object/config.ts reads MAX_OPEN_CALLS and MAX_OPEN_CALLS_PER_PRINCIPAL from its vars). */
export interface OpenCallLimits {
  total: number;
  perPrincipal: number;
  trustedReserve: number;
}
export const DEFAULT_OPEN_CALL_LIMITS: OpenCallLimits = {
  total: MAX_OPEN_CALLS,
  perPrincipal: MAX_OPEN_CALLS_PER_PRINCIPAL,
  trustedReserve: TRUSTED_OPEN_CALLS_RESERVE,
};

/** The limits for a `total` (1…MAX_OPEN_CALLS) and optionally a per-principal share: the reserve is
 * a quarter of the total, and a share that is not strictly below what principals may hold together
 * is ignored (one principal must never be able to fill the table). Values out of range: defaults. */
export function openCallLimits(total?: number, perPrincipal?: number): OpenCallLimits {
  const t = total !== undefined && Number.isInteger(total) && total >= 4 && total <= MAX_OPEN_CALLS ? total : MAX_OPEN_CALLS;
  const trustedReserve = Math.floor(t / 4);
  const shared = t - trustedReserve;
  const fallback = Math.floor(t / 4);
  const p =
    perPrincipal !== undefined && Number.isInteger(perPrincipal) && perPrincipal >= 1 && perPrincipal < shared ? perPrincipal : fallback;
  return { total: t, perPrincipal: p, trustedReserve };
}

/** Live connections one principal (token `sub`) may hold in one namespace: room for a fleet of
 * processes and tabs of one user, not for a connection flood. */
export const MAX_CONNECTIONS_PER_PRINCIPAL = 1_000;
/** Live connections one principal may hold over every namespace together (worker and stream
 * sockets; engine-do/src/principal-connections.ts counts them). Each namespace is its own object
 * with its own MAX_CONNECTIONS_PER_PRINCIPAL, so a token allowed `ns:*` multiplied it by every name
 * it could make up (2,100 sockets took workerd from 395 to 1,161 MiB). One namespace's worth: a
 * user's fleet fits one namespace's bound, and spreading it over namespaces does not grow it. */
export const MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES = 1_000;
/** Live connections from one client address in one namespace (a Durable Object holds ~32k). */
export const MAX_CONNECTIONS_PER_IP = 2_000;

/** Functions, triggers and trigger types one principal may hold in one namespace, across all its
 * connections (a single connection is bounded by MAX_REGISTRATIONS_PER_WORKER). */
export const MAX_REGISTRATIONS_PER_PRINCIPAL = 10_000;

/** State one principal (token `sub`) may hold in one namespace, over every scope: keys, and bytes
 * (each value's JSON text plus its scope and key, as UTF-16 units like MAX_VALUE_BYTES). A value
 * counts for the principal that last wrote it; a delete frees it. Trusted callers (the engine, edge
 * hosts such as the agent harness) are not counted. 100 000 keys and 256 MiB are far above what a
 * user's app keeps in one namespace, and a few dozen principals at their cap still fit an object's
 * storage; before, 26 values of 1 MB were stored in 1.2 s with nothing to stop the next thousand.
 * Deployments lower them with the MAX_STATE_KEYS_PER_PRINCIPAL / MAX_STATE_BYTES_PER_PRINCIPAL vars. */
export const MAX_STATE_KEYS_PER_PRINCIPAL = 100_000;
export const MAX_STATE_BYTES_PER_PRINCIPAL = 256 * 1024 * 1024;
export interface StateQuota {
  keys: number;
  bytes: number;
}
