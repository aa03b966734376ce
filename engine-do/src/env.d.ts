// Bindings of the engine Worker (wrangler.toml).
interface Env {
  ENGINE: DurableObjectNamespace<import("./engine-object.ts").Engine>;
  DB: D1Database;
  DELIVERIES: Queue;
  ASSETS: Fetcher;
  EDGE_DEMO?: Fetcher;
  EDGE_HOSTS?: string;
  ALLOW_PRIVATE_HTTP_FUNCTIONS?: string;
  QUEUES?: string;
  HTTP_MIDDLEWARE?: string;
}
