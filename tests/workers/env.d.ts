declare global {
  namespace Cloudflare {
    interface Env {
      ENGINE: DurableObjectNamespace<import("@iii-edge/engine-do").Engine>;
      DB: D1Database;
      TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../deploy/worker.ts");
      durableNamespaces: "Engine";
    }
  }
}
export {};
