// Shared by run.mjs and inspector.mjs: free ports, /proc CPU and RSS, and the two loads.
import { readFileSync } from "node:fs";
import net from "node:net";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

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
