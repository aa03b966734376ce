// Connection shards, as configuration: CONNECTION_SHARDS (wrangler.toml) says over how many objects
// a namespace's worker sockets are spread. 1 (or unset, or anything that is not a number in range)
// is today's engine: one object per namespace holds every socket. The names are the only contract
// between the front door, the catalog object and its shards.

/** The most shards a namespace may be spread over. Each shard costs the catalog one RPC stub and
 * one batch in flight; 64 shards × the 32,768 sockets one object accepts is ~2M sockets, past what
 * one catalog object can route for (docs/scaling.md). */
export const MAX_CONNECTION_SHARDS = 64;

/** CONNECTION_SHARDS as a count, 1 when unset or invalid (sharding off). */
export function connectionShards(env: { CONNECTION_SHARDS?: string }): number {
  const v = env.CONNECTION_SHARDS;
  if (!v || !/^\d+$/.test(v)) return 1;
  const n = Number(v);
  return n >= 1 && n <= MAX_CONNECTION_SHARDS ? n : 1;
}

const SHARD_SUFFIX = /^(.+)#shard-(\d+)$/;

/** The object that holds shard `k`'s sockets of `namespace` (`#` never occurs in a namespace name). */
export const shardName = (namespace: string, k: number): string => `${namespace}#shard-${k}`;

/** The namespace a shard object serves, or undefined when `name` is not a shard's (a catalog object). */
export function shardOf(name: string | undefined): { namespace: string; index: number } | undefined {
  const m = name ? SHARD_SUFFIX.exec(name) : null;
  return m ? { namespace: m[1]!, index: Number(m[2]) } : undefined;
}

/** Round-robin over the shards, per front-door isolate: consecutive connects land on consecutive
 * shards, so N connections spread within one of even (a hash of a stable client key would pin a
 * reconnecting worker to its shard; nothing here needs that: reattach works across shards). */
let nextShard = 0;

/**
 * Which object a worker socket of `namespace` dials: its catalog object when sharding is off, and for
 * the telemetry side socket (`/otel`, dropped anyway); otherwise the next connection shard.
 */
export function socketObjectName(env: { CONNECTION_SHARDS?: string }, namespace: string, path: string): string {
  const n = connectionShards(env);
  if (n <= 1 || path.endsWith("/otel")) return namespace;
  nextShard = (nextShard + 1) % n;
  return shardName(namespace, nextShard);
}
