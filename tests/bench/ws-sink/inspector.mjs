#!/usr/bin/env node
// The ws-sink under bare workerd (config.capnp: no wrangler, no proxy, no trace collector), with and
// without an inspector session attached — wrangler dev always attaches one (its inspector proxy
// reads console output through it). Scenario `history` of run.mjs: IDLE (4) open sockets that
// have each received PRIOR (60 000) messages, then 15 000 messages on a new socket.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { freePort, history, sleep, until } from "./common.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const workerdBin = path.join(root, "node_modules/@cloudflare/workerd-linux-64/bin/workerd");

for (const attached of [false, true]) {
  const port = await freePort();
  const inspectorPort = await freePort();
  const args = [
    "serve",
    "--experimental",
    path.join(here, "config.capnp"),
    "--socket-addr",
    `http=127.0.0.1:${port}`,
    "--directory-path",
    `disk=${mkdtempSync(path.join(tmpdir(), "ws-sink-bare-"))}`,
    `--inspector-addr=127.0.0.1:${inspectorPort}`,
  ];
  const child = spawn(workerdBin, args, { stdio: ["ignore", "ignore", "inherit"] });
  try {
    await until(`http://127.0.0.1:${port}/healthz`, 20_000);
    let session;
    if (attached) {
      // Any session will do; wrangler's sends Runtime.enable.
      const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json();
      session = new WebSocket(targets[0].webSocketDebuggerUrl);
      await new Promise((r, j) => (session.once("open", r), session.once("error", j)));
      session.send(JSON.stringify({ id: 1, method: "Runtime.enable" }));
      session.on("message", () => {});
      await sleep(200);
    }
    for (const idle of [0, Number(process.env.IDLE ?? 4)]) {
      const r = await history(`ws://127.0.0.1:${port}/`, child.pid, idle, Number(process.env.PRIOR ?? 60_000));
      console.log(JSON.stringify({ scenario: "history", runtime: "bare workerd", inspector_session: attached, ...r }));
    }
    session?.close();
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}
process.exit(0);
