#!/usr/bin/env node
// Runs before `npm start` builds anything: when the port is taken, say by whom and stop, touching
// nothing. (The build step rewrites the demo's bundle, which a running `wrangler dev` watches: it
// would reload and drop every socket of the engine already running there.)
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT || "8787";
/** How long a connection attempt to the port may take before it counts as free (loopback answers
 * in well under a millisecond; a refusal is immediate). */
const PROBE_TIMEOUT_MS = 1_000;

/** Where start.mjs records the engine it runs on a port: `{pid, port, started_at}`. */
const pidFileOf = (p) => path.join(root, ".wrangler", `engine-${p}.json`);

const listening = await new Promise((resolve) => {
  const socket = net.connect({ host: "127.0.0.1", port: Number(port) });
  const done = (v) => {
    socket.destroy();
    resolve(v);
  };
  socket.setTimeout(PROBE_TIMEOUT_MS, () => done(false));
  socket.once("connect", () => done(true));
  socket.once("error", () => done(false));
});
if (!listening) process.exit(0);

let engine = false;
try {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) });
  engine = res.ok && typeof (await res.json())?.engine === "object";
} catch {
  // Not HTTP, or not answering: another program holds the port.
}
let pid = "";
try {
  const rec = existsSync(pidFileOf(port)) ? JSON.parse(readFileSync(pidFileOf(port), "utf8")) : undefined;
  if (rec && typeof rec.pid === "number") pid = ` (pid ${rec.pid})`;
} catch {
  // An unreadable record only loses the pid from the message.
}
const other = String(Number(port) + 1);
console.error(
  engine
    ? `an engine is already running on :${port}${pid}; use PORT=${other} npm start for another (its state: III_STATE_DIR=… keeps them apart)`
    : `port ${port} is in use by another program; use PORT=${other} npm start`,
);
process.exit(1);
