// Guest side of a sandbox worker (Node, built-ins only). Started by /init when the VM has a
// virtio-serial port named "engine"; that port is the guest's only way out (no NIC).
//
// 1. It listens on 127.0.0.1:49134 inside the guest (iii's default worker port) and carries every
//    TCP connection made to it over the port, multiplexed, to the host. The host terminates the
//    WebSocket, checks each frame and relays it to the engine with a token the guest never sees.
// 2. It starts the worker process at once (loader.mjs: iii-sdk preloaded), then waits for the
//    host's start frame (the worker's files, entry and env), writes the files under /root/app and
//    hands the entry to that process; when the process exits it reports why.
//
// Mux frames, both ways: type (1 byte ASCII) | conn (u32 BE) | length (u32 BE) | payload.
//   guest → host  H hello {node}      O open conn     D data     C close conn
//                 R worker running {pid}               X worker exited {code, signal, log_tail}
//   host → guest  S start {files: {path: base64}, entry, env}     D data     C close conn
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

const PORT_DEV = process.argv[2];
/** iii's default worker port, so `registerWorker(process.env.III_URL ?? "ws://localhost:49134")` works. */
const RELAY_PORT = 49134;
const APP_DIR = "/root/app";
/** Child output kept for the exit report: the end of a crash log is what explains it. */
const LOG_TAIL_BYTES = 16 * 1024;
/** A frame larger than this from the host means the stream is corrupt. */
const MAX_FRAME_BYTES = 8 * 1024 * 1024;

const fd = fs.openSync(PORT_DEV, "r+");
let writing = Promise.resolve();
function send(type, conn, payload = Buffer.alloc(0)) {
  const head = Buffer.alloc(9);
  head.write(type, 0, "latin1");
  head.writeUInt32BE(conn, 1);
  head.writeUInt32BE(payload.length, 5);
  const buf = Buffer.concat([head, payload]);
  // Writes are chained so frames never interleave.
  writing = writing.then(
    () =>
      new Promise((resolve) => {
        const write = (off) =>
          fs.write(fd, buf, off, buf.length - off, null, (err, n) => {
            if (err) {
              if (err.code === "EAGAIN") return setTimeout(() => write(off), 5);
              process.exit(70);
            }
            if (off + n < buf.length) write(off + n);
            else resolve();
          });
        write(0);
      }),
  );
}
const json = (v) => Buffer.from(JSON.stringify(v));

const conns = new Map();
let nextConn = 1;
const server = net.createServer((sock) => {
  const id = nextConn++;
  conns.set(id, sock);
  send("O", id);
  sock.on("data", (d) => send("D", id, d));
  sock.on("close", () => {
    if (conns.delete(id)) send("C", id);
  });
  sock.on("error", () => {});
});
server.listen(RELAY_PORT, "127.0.0.1");

let tail = Buffer.alloc(0);
function keep(d) {
  tail = Buffer.concat([tail, d]);
  if (tail.length > LOG_TAIL_BYTES) tail = tail.subarray(tail.length - LOG_TAIL_BYTES);
}

// The worker process starts now, with iii-sdk loaded, and waits for its code (loader.mjs).
fs.mkdirSync(APP_DIR, { recursive: true });
const child = spawn("/opt/node/bin/node", ["/worker/loader.mjs"], {
  cwd: APP_DIR,
  env: { PATH: "/opt/node/bin:/bin", HOME: "/root", III_URL: `ws://127.0.0.1:${RELAY_PORT}`, OTEL_ENABLED: "false" },
  stdio: ["pipe", "pipe", "pipe", "ipc"],
});
// The hello tells the host this VM is ready for code: the server listens and iii-sdk is loaded.
let listening = false;
let preloaded = false;
const helloIfReady = () => listening && preloaded && send("H", 0, json({ node: process.version }));
child.on("message", (m) => {
  if (m?.type === "preloaded" && !preloaded) {
    preloaded = true;
    child.disconnect();
    helloIfReady();
  }
});
child.stdout.on("data", keep);
child.stderr.on("data", keep);
child.stdin.on("error", () => {});
let started = false;
let exitReport;
child.on("spawn", () => {
  // The runtime inherits init's OOM protection; the worker must not, so a worker that allocates
  // too much is the one the guest's OOM killer stops.
  try {
    fs.writeFileSync(`/proc/${child.pid}/oom_score_adj`, "0");
  } catch {
    // the child already exited
  }
});
child.on("exit", (code, signal) => {
  exitReport = json({ code, signal, log_tail: tail.toString("utf8") });
  // Before the start frame nobody is waiting for the report; it is sent with the start instead.
  if (started) send("X", 0, exitReport);
});

function start(spec) {
  if (started) return;
  started = true;
  try {
    for (const [p, b64] of Object.entries(spec.files)) {
      const full = path.resolve(APP_DIR, p);
      if (!full.startsWith(`${APP_DIR}/`)) throw new Error(`file path ${p} leaves ${APP_DIR}`);
      fs.mkdirSync(path.dirname(full), { recursive: true });
      fs.writeFileSync(full, Buffer.from(b64, "base64"));
    }
    if (!spec.files["package.json"]) fs.writeFileSync(path.join(APP_DIR, "package.json"), '{"type":"module"}\n');
  } catch (e) {
    send("X", 0, json({ code: null, signal: null, error: `could not write the worker's files: ${e.message}`, log_tail: "" }));
    return;
  }
  if (exitReport) return send("X", 0, exitReport);

  child.stdin.write(`${JSON.stringify({ entry: spec.entry, env: spec.env ?? {} })}\n`);
  send("R", 0, json({ pid: child.pid }));
}

let buf = Buffer.alloc(0);
function onData(d) {
  buf = buf.length ? Buffer.concat([buf, d]) : d;
  while (buf.length >= 9) {
    const type = String.fromCharCode(buf[0]);
    const conn = buf.readUInt32BE(1);
    const len = buf.readUInt32BE(5);
    if (len > MAX_FRAME_BYTES) process.exit(71);
    if (buf.length < 9 + len) return;
    const payload = buf.subarray(9, 9 + len);
    buf = buf.subarray(9 + len);
    if (type === "S") start(JSON.parse(payload.toString("utf8")));
    else if (type === "D") conns.get(conn)?.write(Buffer.from(payload));
    else if (type === "C") {
      const s = conns.get(conn);
      conns.delete(conn);
      s?.destroy();
    }
  }
}

const rs = fs.createReadStream(null, { fd, autoClose: false, highWaterMark: 64 * 1024 });
rs.on("data", onData);
// End of file: the host end is gone. The agent powers the VM off; nothing to do here.
rs.on("end", () => process.exit(0));
rs.on("error", () => process.exit(72));
server.on("listening", () => {
  listening = true;
  helloIfReady();
});
