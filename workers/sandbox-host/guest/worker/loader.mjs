// The worker process of a sandbox worker VM, started by runtime.mjs as soon as the VM boots, before
// any code has arrived. It imports iii-sdk first (about 3 s of parsing under a software CPU) and
// runs its connect path once, so a VM from the warm pool only has to import the user's entry: the
// entry's `import "iii-sdk"` then resolves to the module already loaded and compiled. Then it reads one JSON line from stdin,
// {entry, env}, sets the env and imports the entry from /root/app. A throw or an uncaught error
// ends this process, and runtime.mjs reports the exit to the host.
import { createHash } from "node:crypto";
import net from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** Longest the warm-up may take; past it the VM is offered anyway. */
const WARM_UP_MS = 15_000;
/** After the SDK's first frames arrive, how long to let the rest of its connect burst come. */
const WARM_UP_TAIL_MS = 200;

/**
 * Run the SDK's connect-and-register path once against a throwaway in-guest endpoint that only
 * completes the WebSocket handshake and says workerregistered. V8 compiles functions on first
 * call, and under a software CPU that first call is what a spawn would otherwise wait for.
 */
async function warmUp(registerWorker) {
  // When the SDK's first frames (its registrations) arrived; they may come in one TCP read or several.
  let firstFrameAt = 0;
  const server = net.createServer((sock) => {
    let head = "";
    sock.on("error", () => {});
    sock.on("data", (d) => {
      if (head.includes("\r\n\r\n")) {
        firstFrameAt ||= Date.now();
        return;
      }
      head += d.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      const key = /sec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
      const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
      const hello = Buffer.from(JSON.stringify({ type: "workerregistered", worker_id: "00000000-0000-4000-8000-000000000000" }));
      sock.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      sock.write(Buffer.concat([Buffer.from([0x81, hello.length]), hello]));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const iii = registerWorker(`ws://127.0.0.1:${server.address().port}`, {
    workerName: "warm-up",
    otel: { enabled: false },
    enableMetricsReporting: false,
  });
  iii.registerFunction("warm-up::f", async () => null, { description: "warm-up", request_format: { type: "object" } });
  const end = Date.now() + WARM_UP_MS;
  while (!(firstFrameAt && Date.now() - firstFrameAt >= WARM_UP_TAIL_MS) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  await iii.shutdown().catch(() => {});
  server.close();
}

const sdk = await import("iii-sdk");
await warmUp(sdk.registerWorker).catch(() => {});
process.send?.({ type: "preloaded" });
const APP_DIR = "/root/app";
let line = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", async (d) => {
  line += d;
  const nl = line.indexOf("\n");
  if (nl < 0) return;
  process.stdin.removeAllListeners("data");
  process.stdin.pause();
  const spec = JSON.parse(line.slice(0, nl));
  Object.assign(process.env, spec.env);
  process.chdir(APP_DIR);
  await import(pathToFileURL(path.resolve(APP_DIR, spec.entry)).href);
});
