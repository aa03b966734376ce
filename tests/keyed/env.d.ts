declare global {
  namespace Cloudflare {
    interface Env {
      ENGINE: DurableObjectNamespace<import("@iii-edge/engine-do").Engine>;
      DEMO_COUNTERS: DurableObjectNamespace<import("@iii-edge/demo-app/edge").DemoCounters>;
      DB: D1Database;
      TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../deploy/worker.ts");
      durableNamespaces: "Engine" | "DemoCounters";
    }
  }
}
export {};
