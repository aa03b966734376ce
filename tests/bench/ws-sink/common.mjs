// Shared by run.mjs, inspector.mjs and ../flood-bench.ts: the sink under wrangler dev, free ports,
// /proc CPU and RSS, and the two loads.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../bench-engine.mjs";

export { freePort };

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) and RSS (MiB) of a process. */
export function usage(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;
  return { pgid: Number(f[2]), cpu: (Number(f[11]) + Number(f[12])) / 100, rss };
}

export async function until(url, ms = 60_000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > end) throw new Error(`${url} did not answer`);
    await sleep(100);
  }
}

/** Node's own WebSocket (undici): writes a burst about three times faster than the `ws` package. */
export function openSocket(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.addEventListener("open", () => resolve(ws), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open ${url}`)), { once: true });
  });
}

/** Send `n` 100-byte messages, then "count?"; resolves when the object has handled them all. */
export async function burst(ws, n) {
  const counted = new Promise((r) => {
    const h = (ev) => {
      if (!/^\d+$/.test(String(ev.data))) return;
      ws.removeEventListener("message", h);
      r(Number(ev.data));
    };
    ws.addEventListener("message", h);
  });
  const frame = "x".repeat(100);
  for (let i = 0; i < n; i++) ws.send(frame);
  ws.send("count?");
  return counted;
}

export function closeSocket(ws) {
  return new Promise((r) => {
    ws.addEventListener("close", r, { once: true });
    ws.close(1000, "done");
    setTimeout(r, 15_000);
  });
}

/** `idle` sockets that have each received `prior` messages stay open; then 15 000 messages on a
 * new socket: what each costs the runtime, in µs of CPU of process `pid`. */
export async function history(url, pid, idle, prior) {
  const open = [];
  for (let i = 0; i < idle; i++) {
    const ws = await openSocket(url);
    if (prior) await burst(ws, prior);
    open.push(ws);
  }
  const ws = await openSocket(url);
  const c0 = usage(pid).cpu;
  const t0 = Date.now();
  await burst(ws, 15_000);
  const result = { idle, prior, ms: Date.now() - t0, us_per_message: Math.round(((usage(pid).cpu - c0) * 1e6) / 15_000) };
  await Promise.all([ws, ...open].map(closeSocket));
  return result;
}

/**
 * The sink under `wrangler dev` on a free port, in its own process group (stopped as a group, and
 * when this process exits), with wrangler's local observability on or off (`obs`). Resolves once
 * `/count` answers, which goes through the object. `runtime`: the workerd that runs the Worker
 * (wrangler dev runs two: its proxy, listening on `port`, and the runtime, in the same group).
 */
export async function startSink({ obs = false } = {}) {
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
        X_LOCAL_OBSERVABILITY: obs ? "true" : "false",
      },
    },
  );
  let log = "";
  child.stderr.on("data", (d) => (log = (log + d).slice(-8_000)));
  const kill = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // gone
    }
  };
  process.on("exit", () => kill("SIGTERM"));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`ws-sink exited:\n${log}`);
    if (
      await fetch(`${url}/count`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`ws-sink not up:\n${log}`);
    await sleep(200);
  }
  return {
    port,
    url,
    runtime: runtimeOf(child.pid, port),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      kill("SIGTERM");
      const hard = setTimeout(() => kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(hard);
    },
  };
}

/** The workerd of process group `group` that is not the proxy listening on `port`. */
export function runtimeOf(group, port) {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, "utf8").trim() !== "workerd") continue;
      if (usage(Number(d)).pgid !== group) continue;
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").includes(`127.0.0.1:${port}`)) continue;
      return Number(d);
    } catch {
      // gone
    }
  }
  return undefined;
}
