#!/usr/bin/env node
// The ws-sink repro under `wrangler dev` (README.md in this folder). Scenarios:
//   burst    SOCKETS (4) sockets × FRAMES (15 000) 100-byte messages at once; with OBS=on (wrangler's
//            default) or OBS=off (X_LOCAL_OBSERVABILITY=false). Reports how long the object takes,
//            its workerd's CPU and peak RSS, and the slowest request through the object meanwhile.
//   history  IDLE (0,4,8) open sockets that have each received PRIOR (15 000) messages, then 15 000
//            messages on a new socket: µs of CPU per message (OBS=off).
// Bounded: LIMIT_S (120) seconds per burst; everything on 127.0.0.1; wrangler stopped at the end.
import { burst, closeSocket, history, openSocket, sleep, startSink, usage } from "./common.mjs";

const scenario = process.argv[2] ?? "burst";
const OBS = process.env.OBS ?? (scenario === "burst" ? "on" : "off");
const SOCKETS = Number(process.env.SOCKETS ?? 4);
const FRAMES = Number(process.env.FRAMES ?? 15_000);
const LIMIT_S = Number(process.env.LIMIT_S ?? 120);

const sink = await startSink({ obs: OBS !== "off" });
const { port, runtime } = sink;
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
await sink.stop();
process.exit(0);
