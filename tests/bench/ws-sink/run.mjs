#!/usr/bin/env node
// The ws-sink repro under `wrangler dev` (README.md in this folder). Scenarios:
//   burst    SOCKETS (4) sockets × FRAMES (15 000) 100-byte messages at once; with OBS=on (wrangler's
//            default) or OBS=off (X_LOCAL_OBSERVABILITY=false). Reports how long the object takes,
//            its workerd's CPU and peak RSS, and the slowest request through the object meanwhile.
//   history  IDLE (0,4,8) open sockets that have each received PRIOR (15 000) messages, then 15 000
//            messages on a new socket: µs of CPU per message (OBS=off).
// Bounded: LIMIT_S (120) seconds per burst; everything on 127.0.0.1; wrangler stopped at the end.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { burst, closeSocket, freePort, history, openSocket, sleep, until, usage } from "./common.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const scenario = process.argv[2] ?? "burst";
const OBS = process.env.OBS ?? (scenario === "burst" ? "on" : "off");
const SOCKETS = Number(process.env.SOCKETS ?? 4);
const FRAMES = Number(process.env.FRAMES ?? 15_000);
const LIMIT_S = Number(process.env.LIMIT_S ?? 120);

const port = await freePort();
const child = spawn(
  path.join(root, "node_modules/.bin/wrangler"),
  [
    "dev",
    "--config",
    path.join(here, "wrangler.toml"),
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(await freePort()),
    "--persist-to",
    mkdtempSync(path.join(tmpdir(), "ws-sink-")),
    "--show-interactive-dev-session=false",
    "--log-level",
    "warn",
  ],
  {
    cwd: here,
    detached: true,
    // wrangler's output only if it fails to start (stopping it mid-trace prints pages of errors).
    stdio: ["ignore", "ignore", "pipe"],
    env: {
      ...process.env,
      PATH: `${path.join(root, "node_modules/.bin")}${path.delimiter}${process.env.PATH}`,
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_HIDE_BANNER: "true",
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      X_LOCAL_OBSERVABILITY: OBS === "off" ? "false" : "true",
    },
  },
);
const stop = () => {
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    // gone
  }
};
process.on("exit", stop);
let log = "";
child.stderr.on("data", (d) => (log = (log + d).slice(-8_000)));
await until(`http://127.0.0.1:${port}/healthz`).catch((e) => {
  console.error(log);
  throw e;
});

// wrangler dev runs two workerd processes: its proxy (listening on `port`) and the runtime of the
// Worker, the other one in wrangler's process group.
const workerd = readdirSync("/proc")
  .filter((d) => /^\d+$/.test(d))
  .map(Number)
  .filter((p) => {
    try {
      return readFileSync(`/proc/${p}/comm`, "utf8").trim() === "workerd" && usage(p).pgid === child.pid;
    } catch {
      return false;
    }
  });
const runtime = workerd.find((p) => !readFileSync(`/proc/${p}/cmdline`, "utf8").includes(`127.0.0.1:${port}`));
const url = `ws://127.0.0.1:${port}/?mode=${process.env.MODE ?? "hibernate"}`;

if (scenario === "history") {
  for (const idle of (process.env.IDLE ?? "0,4,8").split(",").map(Number)) {
    console.log(JSON.stringify({ scenario, obs: OBS, ...(await history(url, runtime, idle, Number(process.env.PRIOR ?? 15_000))) }));
  }
} else {
  const sockets = await Promise.all(Array.from({ length: SOCKETS }, () => openSocket(url)));
  const before = usage(runtime);
  let peak = before.rss;
  let slowest = 0;
  let done = false;
  const t0 = Date.now();
  const all = Promise.all(sockets.map((ws) => burst(ws, FRAMES))).then(() => (done = true));
  while (!done && Date.now() - t0 < LIMIT_S * 1000) {
    const t = Date.now();
    await fetch(`http://127.0.0.1:${port}/count`, { signal: AbortSignal.timeout(5_000) }).catch(() => {});
    slowest = Math.max(slowest, Date.now() - t);
    peak = Math.max(peak, usage(runtime).rss);
    await sleep(200);
  }
  void all;
  const after = usage(runtime);
  console.log(
    JSON.stringify({
      scenario,
      obs: OBS,
      sockets: SOCKETS,
      frames: FRAMES,
      handled: done,
      ms: Date.now() - t0,
      cpu_s: +(after.cpu - before.cpu).toFixed(2),
      rss_mib: [Math.round(before.rss), Math.round(Math.max(peak, after.rss))],
      slowest_object_request_ms: slowest,
    }),
  );
  await Promise.all(sockets.map(closeSocket));
}
stop();
process.exit(0);
