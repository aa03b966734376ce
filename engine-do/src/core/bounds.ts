// Engine-side bounds on what one caller, one target or one principal can hold open. Each is a
// named constant with the reason for its number; hitting one answers the caller at once with a
// typed error and leaves everyone else alone.

/** Calls one connection (or one HTTP principal) may have waiting at once. A well-behaved worker
 * pipelines far fewer; 10,000 never-answered calls used to take the whole object down. */
export const MAX_OPEN_CALLS_PER_CALLER = 1_000;
/** Calls one target worker may be asked to run at once: a hung worker collects at most this many. */
export const MAX_OPEN_CALLS_PER_TARGET = 2_000;
/** Calls open in one engine object in total: bounds the routing table's memory (~1 KiB each). */
export const MAX_OPEN_CALLS = 20_000;

/** Live connections one principal (token `sub`) may hold in one namespace: room for a fleet of
 * processes and tabs of one user, not for a connection flood. */
export const MAX_CONNECTIONS_PER_PRINCIPAL = 1_000;
/** Live connections from one client address in one namespace (a Durable Object holds ~32k). */
export const MAX_CONNECTIONS_PER_IP = 2_000;

/** Functions, triggers and trigger types one principal may hold in one namespace, across all its
 * connections (a single connection is bounded by MAX_REGISTRATIONS_PER_WORKER). */
export const MAX_REGISTRATIONS_PER_PRINCIPAL = 10_000;
