#!/usr/bin/env node
// `npm run worker -- <name>`: one built-in harness worker (workers/<name>, its Node entry
// `@iii-edge/worker-<name>/node`) as a process of its own, connected to the engine over WebSocket
// (`runWorkers` from @iii-edge/sdk-edge/worker-node). Pair it with HARNESS_DISABLE=<name> on the
// engine, or both copies register the same functions.
//
// `npm run worker -- counter` runs the demo's keyed counter (demo-app/edge/counter.ts,
// docs/keyed-workers.md) the same way: each user's instance a node:sqlite file under III_KEYED_DIR
// (default $III_STATE_DIR/keyed). `npm start` hosts it too, in the Worker: give this copy other
// function ids with COUNTER_PREFIX (e.g. `ncounter`: `ncounter::add`), or leave EDGE_KEYED out of
// the engine's EDGE_HOSTS.
//
//   III_URL      engine address (default ws://127.0.0.1:$PORT/, PORT default 8787)
//   III_TOKEN    sent as `Authorization: Bearer …` (an engine with AUTH_SECRET asks for one)
//   CREDENTIALS_KEY  from the environment, else .dev.vars, else the key `npm start` made for the
//                    same state ($III_STATE_DIR/credentials.key, default .wrangler/state)
//
// The workspace packages resolve to their TypeScript sources through the `iii-edge-source`
// condition, which .npmrc's node-options gives every npm script (Node strips the types itself).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** Exit code for a wrong command line (unknown worker, no source condition). */
const USAGE_EXIT = 2;
const WORKER_PACKAGE = /^@iii-edge\/worker-(.+)$/;

/** Workers that are no package's `./node` entry, by name: the module that exports each one. */
const OTHER_WORKERS = {
  // The cassettes worker ships inside the harness package (docs/cassettes.md).
  cassettes: () => import("@iii-edge/worker-harness/cassettes"),
  counter: async () => {
    const { keyedCounter } = await import("@iii-edge/demo-app/counter");
    return { worker: keyedCounter(process.env.COUNTER_PREFIX || "counter") };
  },
};

/** The harness workers in the workspace (packages `@iii-edge/worker-<name>` with a `./node` entry)
 * and the demo's. */
function availableWorkers() {
  const names = Object.keys(OTHER_WORKERS);
  for (const dir of JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).workspaces) {
    const file = path.join(root, dir, "package.json");
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, "utf8"));
    const m = WORKER_PACKAGE.exec(pkg.name ?? "");
    if (m && pkg.exports?.["./node"]) names.push(m[1]);
  }
  return names.sort();
}

function usage(problem) {
  console.error(`worker: ${problem}`);
  console.error("usage: npm run worker -- <name>");
  console.error(`workers: ${availableWorkers().join(", ")}`);
  process.exit(USAGE_EXIT);
}

const name = process.argv[2];
if (!name || name.startsWith("-")) usage("which worker?");
if (!availableWorkers().includes(name)) usage(`no worker named "${name}"`);

// Without the condition, the packages would resolve to their built dist/ (stale or absent).
if (!import.meta.resolve("@iii-edge/sdk-edge/worker-node").endsWith("/src/worker-node.ts")) {
  usage("run it through npm (`npm run worker -- <name>`), or node --conditions=iii-edge-source");
}

/** CREDENTIALS_KEY as `npm start` settles it: environment, .dev.vars, then the state's own file. */
function credentialsKey() {
  if (process.env.CREDENTIALS_KEY) return process.env.CREDENTIALS_KEY;
  const devVars = path.join(root, ".dev.vars");
  const line = existsSync(devVars) ? /^\s*CREDENTIALS_KEY\s*=\s*["'`]?([^"'`\n]+)["'`]?\s*$/m.exec(readFileSync(devVars, "utf8")) : null;
  if (line) return line[1];
  const file = path.join(path.resolve(root, process.env.III_STATE_DIR || ".wrangler/state"), "credentials.key");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
}

const { runWorkers } = await import("@iii-edge/sdk-edge/worker-node");
// A worker whose Node entry exports `run(url, options)` connects itself (the MCP client registers
// functions as it learns them, and needs its EdgeClient to unregister them); the rest run as modules.
const entry = name in OTHER_WORKERS ? await OTHER_WORKERS[name]() : await import(`@iii-edge/worker-${name}/node`);
const url = process.env.III_URL || `ws://127.0.0.1:${process.env.PORT || "8787"}/`;
const env = { ...process.env };
const key = credentialsKey();
if (key) env.CREDENTIALS_KEY = key;
const headers = process.env.III_TOKEN ? { Authorization: `Bearer ${process.env.III_TOKEN}` } : undefined;

let running;
try {
  running =
    typeof entry.run === "function"
      ? entry.run(url, { env, headers, workerName: name })
      : runWorkers(url, [entry.worker], { env, headers, workerName: name });
} catch (e) {
  // A setting the worker cannot use (e.g. MCP_SERVERS that is not JSON): its message, not a stack.
  console.error(`worker ${name}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(USAGE_EXIT);
}
/** How long a first connection may take before we say it is not there yet (the client keeps
 * retrying quietly: an engine still starting is normal). */
const UNREACHABLE_NOTICE_MS = 5_000;
let connectedOnce = false;
const notice = setTimeout(
  () => console.error(`worker ${name}: cannot connect to ${url} yet; retrying (is the engine up? does it want III_TOKEN?)`),
  UNREACHABLE_NOTICE_MS,
);
running.client.addConnectionStateListener((state) => {
  if (state === "connected") {
    clearTimeout(notice);
    console.log(connectedOnce ? `worker ${name} reconnected to ${url}` : `worker ${name} connected to ${url}`);
    connectedOnce = true;
  } else if (state === "reconnecting" && connectedOnce) {
    console.error(`worker ${name}: connection to ${url} lost; reconnecting`);
  }
});

let stopping = false;
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    // A second signal while shutting down: stop waiting.
    if (stopping) process.exit(1);
    stopping = true;
    clearTimeout(notice);
    void running.shutdown().then(
      () => process.exit(0),
      (e) => {
        console.error(`worker ${name}: shutdown failed: ${e instanceof Error ? e.message : String(e)}`);
        process.exit(1);
      },
    );
  });
}
