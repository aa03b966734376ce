declare global {
  namespace Cloudflare {
    interface Env {
      ENGINE: DurableObjectNamespace<import("../../engine-do/src/engine-object.ts").Engine>;
      DB: D1Database;
      DELIVERIES: Queue;
      ASSETS: Fetcher;
      QUEUES?: string;
      TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../engine-do/src/index.ts");
      durableNamespaces: "Engine";
    }
  }
}
export {};
