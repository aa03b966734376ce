// The deployable Worker (wrangler.toml `main`): the engine and what runs on it, composed above the
// packages so none of them depends on another's insides. `npm start` and `wrangler deploy` ship
// this one entry: the engine's front door and Durable Object, and the Worker-hosted functions the
// engine reaches by service binding (EDGE_HOSTS).
import { Engine, PrincipalConnections, engineWorker } from "@iii-edge/engine-do";
import { foreignOriginRefusal, nonJsonBodyRefusal } from "@iii-edge/engine-do/auth";
import { mcpNamespaceOf, serveMcp } from "@iii-edge/worker-mcp/server";
import { consoleToken, isConsoleTokenRequest } from "@iii-edge/demo-app/console-token";

export { Engine, PrincipalConnections };
/** Demo functions hosted in this Worker (`EDGE_DEMO` service binding, wrangler.toml). */
export { DemoEdgeFunctions } from "@iii-edge/demo-app/edge";
/** The demo keyed counter (`EDGE_KEYED` service binding) and its object per user (`DEMO_COUNTERS`). */
export { DemoCounters, DemoKeyedWorkers } from "@iii-edge/demo-app/edge";
/** The built-in harness workers (`HARNESS` service binding; `HARNESS_DISABLE` leaves some out). */
export { HarnessWorkers } from "./harness.ts";

/** The engine's front door, the console's token route (`/_console/token`), and its catalog as an MCP server at `/mcp` and `/ns/<ns>/mcp`
 * (workers/mcp/README.md; `MCP_EXPOSE` in wrangler.toml says which functions are tools). */
const refused = (status: number, code: string, message: string) => Response.json({ error: { code, message } }, { status });

export default {
  ...engineWorker,
  fetch: (request, env, ctx) => {
    // The open engine's rule for web pages of other origins holds for the routes composed here too
    // (engine-do/src/auth.ts foreignOriginRefusal); the engine's own fetch applies it again.
    const foreign = foreignOriginRefusal(request, env);
    if (foreign) return refused(403, "forbidden", foreign);
    // The console page's short-lived token (demo-app/edge/console-token.ts, demo-app/README.md "Auth").
    if (isConsoleTokenRequest(request)) return consoleToken(request, env);
    if (mcpNamespaceOf(new URL(request.url).pathname) !== undefined) {
      // MCP is JSON-RPC: a browser's text/plain or form POST is a forged one.
      const notJson = nonJsonBodyRefusal(request);
      if (notJson) return refused(415, "invalid_arguments", notJson);
      return serveMcp(request, env);
    }
    return engineWorker.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
