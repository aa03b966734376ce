declare global {
  namespace Cloudflare {
    interface Env {
      ENGINE: DurableObjectNamespace<import("../../engine-do/src/engine-object.ts").Engine>;
      DB: D1Database;
      TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../engine-do/src/index");
      durableNamespaces: "Engine";
    }
  }
}
export {};
