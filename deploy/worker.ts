// The deployable Worker (wrangler.toml `main`): the engine and what runs on it, composed above the
// packages so none of them depends on another's insides. `npm start` and `wrangler deploy` ship
// this one entry: the engine's front door and Durable Object, and the Worker-hosted functions the
// engine reaches by service binding (EDGE_HOSTS).
import { Engine, PrincipalConnections, engineWorker } from "@iii-edge/engine-do";
import { mcpNamespaceOf, serveMcp } from "@iii-edge/worker-mcp/server";
import { consoleToken, isConsoleTokenRequest } from "@iii-edge/demo-app/console-token";

export { Engine, PrincipalConnections };
/** Demo functions hosted in this Worker (`EDGE_DEMO` service binding, wrangler.toml). */
export { DemoEdgeFunctions } from "@iii-edge/demo-app/edge";
/** The built-in harness workers (`HARNESS` service binding; `HARNESS_DISABLE` leaves some out). */
export { HarnessWorkers } from "./harness.ts";

/** The engine's front door, the console's token route (`/_console/token`), and its catalog as an MCP server at `/mcp` and `/ns/<ns>/mcp`
 * (workers/mcp/README.md; `MCP_EXPOSE` in wrangler.toml says which functions are tools). */
export default {
  ...engineWorker,
  fetch: (request, env, ctx) =>
    // The console page's short-lived token (demo-app/edge/console-token.ts, demo-app/README.md "Auth").
    isConsoleTokenRequest(request) ? consoleToken(request, env) :
    mcpNamespaceOf(new URL(request.url).pathname) !== undefined ? serveMcp(request, env) : engineWorker.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
