#!/usr/bin/env node
// The scale benches (queue floods, http triggers, wake, a big catalog, discovery fan-out), run by
// `npm run bench` after run.mjs's own (or alone: `node tests/bench/scale-bench.mjs`):
//  - queue-flood-bench.ts: a flood on the durable and on the Cloudflare Queues backend against
//    routed invoke of 10 closed-loop callers (wrangler dev, handler in its own process);
//  - workerd/scale.bench.test.ts (vitest plugin, the real Engine object): wake after eviction with
//    1,000 functions and 200 bindings, a 10,000-function catalog, discovery fan-out.
// Each prints its figures beside its baseline; this runner prints the lines of both, in order.
//  - idle-sockets-bench.ts: 10,000 idle worker connections on one engine, memory and routed latency.
// BENCH_SCALE_ONLY=queue|idle|workerd runs one of them. See README.md in this folder ("Scale").
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const node = path.join(root, "node_modules/.bin/node");
const only = process.env.BENCH_SCALE_ONLY ?? "";

function run(cmd, args, filter) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: process.env });
    let buf = "";
    const out = (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (filter(line)) console.log(filter(line) === true ? line : filter(line));
      }
    };
    child.stdout.on("data", out);
    child.stderr.on("data", (d) => process.env.BENCH_DEBUG && process.stderr.write(d));
    child.once("exit", (code) => resolve(code));
  });
}

let failed = 0;
if (only === "" || only === "queue") {
  console.log("\n## Queue flood vs routed invoke (tests/bench/queue-flood-bench.ts)");
  const code = await run(
    node,
    ["--conditions=iii-edge-source", path.join(here, "queue-flood-bench.ts")],
    (l) => !l.startsWith("[iii]") && !l.startsWith("[OTel]"),
  );
  if (code !== 0) failed++;
}
if (only === "" || only === "idle") {
  console.log("\n## Idle sockets (tests/bench/idle-sockets-bench.ts)");
  const code = await run(
    node,
    ["--conditions=iii-edge-source", path.join(here, "idle-sockets-bench.ts")],
    (l) => !l.startsWith("[iii]") && !l.startsWith("[OTel]"),
  );
  if (code !== 0) failed++;
}
if (only === "" || only === "workerd") {
  console.log("\n## Wake, catalog, discovery fan-out inside workerd (tests/bench/workerd/scale.bench.test.ts)");
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips ANSI colour escapes from wrangler output
  const plain = (l) => l.replace(/\x1b\[[0-9;]*m/g, "");
  const code = await run(
    path.join(root, "node_modules/.bin/vitest"),
    ["run", "--config", path.join(here, "workerd/vitest.config.ts")],
    (l) => {
      const p = plain(l);
      if (p.startsWith("BENCH ")) return p.slice(6);
      if (/^\s*(×|FAIL)/.test(p) || /Error:/.test(p)) return p;
      return false;
    },
  );
  if (code !== 0) failed++;
}
process.exit(failed ? 1 : 0);
