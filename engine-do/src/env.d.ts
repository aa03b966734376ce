// Bindings of the engine Worker (wrangler.toml).
interface Env {
  ENGINE: DurableObjectNamespace<import("./engine-object.ts").Engine>;
  /** Each principal's connections over every namespace (principal-connections.ts). */
  PRINCIPALS?: DurableObjectNamespace<import("./principal-connections.ts").PrincipalConnections>;
  DB: D1Database;
  DELIVERIES: Queue;
  ASSETS: Fetcher;
  EDGE_DEMO?: Fetcher;
  /** The demo keyed counter's host and its object per user (demo-app/edge/counter.ts). */
  EDGE_KEYED?: Fetcher;
  DEMO_COUNTERS?: DurableObjectNamespace;
  EDGE_HOSTS?: string;
  ALLOW_PRIVATE_HTTP_FUNCTIONS?: string;
  QUEUES?: string;
  HTTP_MIDDLEWARE?: string;
  /** Signs and verifies tokens (a Worker secret when deployed; `npm start` reads the environment). */
  AUTH_SECRET?: string;
  /** A function id (default namespace) that turns a request's headers/query into a grant. */
  AUTH_FUNCTION?: string;
  /** Extra web origins the open engine serves (auth.ts allowedOrigins): a dev server's app. */
  ALLOWED_ORIGINS?: string;
  /** iii's RBAC worker listener at /rbac and /ns/<ns>/rbac (rbac.ts): JSON, protocol's rbacConfigSchema. */
  RBAC?: string;
  /** Comma-separated env var names HTTP-invoked functions may use as secrets. */
  HTTP_FUNCTION_SECRETS?: string;
  /** Lower the connection bounds of core/bounds.ts (tests). */
  MAX_CONNECTIONS_PER_TOKEN?: string;
  MAX_CONNECTIONS_PER_IP?: string;
  /** MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES of core/bounds.ts, set (tests lower it). */
  MAX_CONNECTIONS_PER_TOKEN_ACROSS_NAMESPACES?: string;
  /** Lower the open-call bounds of core/bounds.ts: the whole table, and one principal's share of it. */
  MAX_OPEN_CALLS?: string;
  MAX_OPEN_CALLS_PER_PRINCIPAL?: string;
  /** Lower the per-principal state quota of core/bounds.ts (keys, bytes). */
  MAX_STATE_KEYS_PER_PRINCIPAL?: string;
  MAX_STATE_BYTES_PER_PRINCIPAL?: string;
  /** The deadline (ms) of a call that names none, instead of DEFAULT_INVOKE_TIMEOUT_MS (tests). */
  INVOKE_TIMEOUT_MS?: string;
  /** Observability (engine-do/src/core/telemetry/config.ts): on|off, head sampling, retention, export. */
  TRACING?: string;
  TRACE_STORE?: string;
  TRACE_RATE_LIMIT?: string;
  TRACE_SAMPLE_RATIO?: string;
  TRACES_MAX_AGE_MS?: string;
  TRACES_MAX_SPANS?: string;
  TRACES_MAX_BYTES?: string;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_HEADERS?: string;
  /** Connection shards per namespace (engine-do/src/shards/); unset or 1: one object holds every socket. */
  CONNECTION_SHARDS?: string;
}
