#!/usr/bin/env node
// `npm run bench`: routed invoke (caller → engine → worker → engine → caller, the worker in a
// separate process) against a raw Durable Object WebSocket echo, on the same runtime in the same
// run, plus a relay baseline (the same two hops through a Durable Object with no engine logic);
// then the same routed invoke on an engine with AUTH_SECRET (callers and worker holding tokens)
// against the open engine, and connect latency (upgrade → workerregistered) open / with a token /
// through an AUTH_FUNCTION. See README.md in this folder for what is measured and the figures.
//
// Options (env): BENCH_DURATION_MS (3000), BENCH_WARMUP_MS (1000), BENCH_RUNS (3),
// BENCH_CONCURRENCY ("1,10,100"), BENCH_WORKER ("sdk" | "raw"), BENCH_PORT (free port, open engine),
// BENCH_ONLY ("auth": routed auth on/off and connect only; "base": without the auth parts),
// BENCH_CONNECTS (200 sequential connects per variant and run), BENCH_AUTH_CALL (the callers'
// `call` globs, comma-separated; "none" for a grant without a call list — isolates the glob check).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { startBenchEngine } from "./bench-engine.mjs";
import { closedLoop, DURATION_MS, openWs, RUNS, sleep, WARMUP_MS, wsChannel } from "./callers.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,10,100").split(",").map(Number);
const WORKER_MODE = process.env.BENCH_WORKER ?? "sdk";
const ONLY = process.env.BENCH_ONLY ?? "";
if (!["", "auth", "base"].includes(ONLY)) throw new Error(`BENCH_ONLY must be "auth" or "base", not ${ONLY}`);
const WITH_BASE = ONLY !== "auth";
const WITH_AUTH = ONLY !== "base";
const CONNECTS = Number(process.env.BENCH_CONNECTS ?? 200);
/** Targets: routed ≥ 50 % of raw-echo round trips/s (1 and 100 callers), p99 ≤ 3× raw at 100. */
const TARGET_RPS_RATIO = 0.5;
const TARGET_P99_RATIO = 3;
/** Targets of the auth work: the per-call grant check costs ≤ 5 % of routed rt/s; a token adds ≤ 2 ms to connect p50. */
const TARGET_AUTH_COST = 0.05;
const TARGET_TOKEN_CONNECT_MS = 2;

/** Grants of the auth-on engine's clients. The callers' `call` list is a realistic few entries with
 * the match last, so every call runs the whole check (two literal compares, two glob regexes). */
const CALLER_GRANT = { sub: "bench-caller", ns: ["*"], call: ["state::get", "state::set", "orders::*", "bench::*"] };
if (process.env.BENCH_AUTH_CALL === "none") delete CALLER_GRANT.call;
else if (process.env.BENCH_AUTH_CALL) CALLER_GRANT.call = process.env.BENCH_AUTH_CALL.split(",");
const ANSWER_GRANT = { sub: "bench-answer", ns: ["*"], register: ["bench::"] };
/** What connects through the AUTH_FUNCTION engine present (answer-worker.mjs `authfn` checks it). */
const AUTHFN_HEADERS = { "x-api-key": "bench-key" };

// ------------------------------------------------------------------ processes

const children = [];
function cleanup() {
  for (const c of children.splice(0)) {
    try {
      if (c.detached) process.kill(-c.child.pid, "SIGTERM");
      else c.child.kill("SIGTERM");
    } catch {
      // gone
    }
  }
}
process.on("exit", cleanup);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => (cleanup(), process.exit(130)));

/** The bench engine (bench-engine.mjs: wrangler dev on wrangler.bench.toml with its own state),
 * stopped by cleanup() with the other processes. */
async function startEngine(opts) {
  const engine = await startBenchEngine(opts);
  children.push({ child: engine.child, detached: true });
  return engine;
}

/** `token`: the worker connects with it (passed in its environment, not its arguments). */
function startAnswerWorker(wsUrl, mode = WORKER_MODE, token) {
  const env = { ...process.env };
  if (token) env.BENCH_TOKEN = token;
  else delete env.BENCH_TOKEN;
  const child = spawn(process.execPath, [path.join(here, "answer-worker.mjs"), wsUrl, mode], {
    cwd: root,
    env,
    stdio: ["ignore", process.env.BENCH_DEBUG ? "inherit" : "ignore", "inherit"],
  });
  children.push({ child, detached: false });
  return child;
}

// ------------------------------------------------------------------ clients

const bearer = (token) => (token ? { Authorization: `Bearer ${token}` } : {});

/** One raw iii call on a fresh control socket (used for readiness checks). */
async function callOnce(wsUrl, function_id, data, headers = {}) {
  const ws = await openWs(wsUrl, headers);
  try {
    return await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${function_id}: no answer`)), 5000);
      ws.on("message", (raw) => {
        const f = JSON.parse(raw.toString());
        if (f.type === "invocationresult" && f.invocation_id === "probe") {
          clearTimeout(t);
          resolve(f);
        }
      });
      ws.send(JSON.stringify({ type: "invokefunction", invocation_id: "probe", function_id, data }));
    });
  } finally {
    ws.close();
  }
}

/**
 * N callers, each its own WebSocket with one call outstanding (closed loop): send, wait for the
 * answer, send the next. `routed` sends iii invokefunction frames to the engine and waits for the
 * invocationresult; `echo` sends the very same text to EchoBench and waits for it to come back.
 * `target` = { kind: "routed" | "echo" | "relay", wsUrl, headers? }.
 */
async function measure(target, n) {
  const { kind, wsUrl, headers = {} } = target;
  const url = kind === "routed" ? `${wsUrl}/` : `${wsUrl}/_bench/${kind}`;
  const sockets = await Promise.all(Array.from({ length: n }, () => openWs(url, headers)));
  if (kind === "routed") await sleep(50); // let the workerregistered frames arrive first
  const r = await closedLoop(sockets.map(wsChannel), {
    frame: (i, seq) =>
      `{"type":"invokefunction","invocation_id":"c${i}-${seq}","function_id":"bench::echo","data":{"caller":${i},"seq":${seq}}}`,
    // routed: skip workerregistered, count error answers; echo/relay: every frame that comes back is the answer.
    ...(kind === "routed" ? { failureLabel: "routed call failed" } : { isAnswer: () => true, isFailure: () => false }),
  });
  await Promise.all(sockets.map((ws) => new Promise((r) => (ws.once("close", r), ws.close(), setTimeout(r, 500)))));
  return r;
}

/** One connect: `new WebSocket(url, {headers})` → the first `workerregistered` frame, in ms. */
function connectOnce(url, headers) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const ws = new WebSocket(url, { perMessageDeflate: false, headers });
    const fail = (e) => (clearTimeout(timer), ws.terminate(), reject(e));
    const timer = setTimeout(() => fail(new Error(`connect to ${url}: no workerregistered within 10 s`)), 10_000);
    ws.once("unexpected-response", (_req, res) => fail(new Error(`connect to ${url}: HTTP ${res.statusCode}`)));
    ws.once("error", fail);
    ws.on("message", (raw) => {
      if (!raw.toString().includes('"workerregistered"')) return;
      const ms = performance.now() - t0;
      clearTimeout(timer);
      ws.removeAllListeners("error");
      ws.on("error", () => {});
      // Closed before the next connect (not timed), so connections do not pile up in the object.
      ws.once("close", () => resolve(ms));
      ws.close();
      setTimeout(() => resolve(ms), 1000);
    });
  });
}

/** `count` sequential connects after 20 untimed ones; p50/p99 in ms. */
async function measureConnect(target, count = CONNECTS) {
  const url = `${target.wsUrl}/`;
  for (let i = 0; i < 20; i++) await connectOnce(url, target.headers);
  const times = [];
  for (let i = 0; i < count; i++) times.push(await connectOnce(url, target.headers));
  times.sort((a, b) => a - b);
  const pct = (p) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))];
  return { p50: pct(50), p99: pct(99), count };
}

// ------------------------------------------------------------------ main

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "—");

/** Wait until `function_id` answers through `wsUrl` (the answering worker has registered). */
async function untilCallable(wsUrl, function_id, worker, headers = {}) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await callOnce(wsUrl, function_id, { ping: 1 }, headers);
      if (!r.error) return;
    } catch {
      // not ready
    }
    if (worker.exitCode !== null) throw new Error(`the worker answering ${function_id} exited`);
    if (Date.now() > deadline) throw new Error(`${function_id} never became callable on ${wsUrl}`);
    await sleep(200);
  }
}

function printRun(run, label, r) {
  console.log(
    `  run ${run}  ${label.padEnd(11)} callers=${String(r.n).padStart(3)}  ${fmt(r.rps).padStart(6)} rt/s  p50 ${fmt(r.p50, 2).padStart(7)} ms  p99 ${fmt(r.p99, 2).padStart(7)} ms  (${r.count} calls${r.failures ? `, ${r.failures} failed` : ""})`,
  );
}

async function main() {
  const parts = [WITH_BASE && "routed vs raw echo vs relay", WITH_AUTH && "routed auth on/off + connect"].filter(Boolean).join("; ");
  console.log(
    `iii-edge bench (${parts}): ${RUNS} runs × callers ${CONCURRENCY.join("/")} × ${DURATION_MS} ms (+${WARMUP_MS} ms warm-up), answering worker: ${WORKER_MODE === "sdk" ? "iii-sdk@0.22.1" : "raw ws"} in a separate process`,
  );
  console.log("callers = N WebSocket connections, one call outstanding each (closed loop); same for the raw echo.");

  // Engines: `open` (no AUTH_SECRET: the loopback engine runs open) always; with the auth parts,
  // `auth` (AUTH_SECRET) and `authfn` (AUTH_SECRET + AUTH_FUNCTION=bench::auth), same config.
  let tokens = {};
  let secret;
  if (WITH_AUTH) {
    const { mintToken } = await import("@iii-edge/protocol/token");
    secret = randomBytes(32).toString("hex");
    tokens = {
      caller: await mintToken(secret, CALLER_GRANT, 3600),
      answer: await mintToken(secret, ANSWER_GRANT, 3600),
      authfn: await mintToken(secret, { sub: "bench-auth", ns: ["*"], register: ["bench::"] }, 3600),
    };
  }
  const [engine, authEngine, fnEngine] = await Promise.all([
    startEngine({ port: Number(process.env.BENCH_PORT) || undefined }),
    WITH_AUTH ? startEngine({ secretVars: { AUTH_SECRET: secret } }) : undefined,
    WITH_AUTH ? startEngine({ secretVars: { AUTH_SECRET: secret, AUTH_FUNCTION: "bench::auth" } }) : undefined,
  ]);
  console.log(
    `engine (wrangler dev, tests/bench/wrangler.bench.toml) on ${engine.url}${authEngine ? `; with AUTH_SECRET on ${authEngine.url}; with AUTH_SECRET + AUTH_FUNCTION on ${fnEngine.url}` : ""}`,
  );
  if (WITH_AUTH) console.log(`callers' grant on the AUTH_SECRET engine: ${JSON.stringify(CALLER_GRANT)}`);
  const workers = [];
  const worker = startAnswerWorker(engine.wsUrl);
  workers.push(worker);
  await untilCallable(engine.wsUrl, "bench::echo", worker);
  if (WITH_AUTH) {
    // An engine with AUTH_SECRET refuses the upgrade without a token: this also checks it is on.
    const refused = await openWs(`${authEngine.wsUrl}/`).then(
      (ws) => (ws.close(), false),
      () => true,
    );
    if (!refused) throw new Error("the AUTH_SECRET engine accepted a connection without a token");
    const authWorker = startAnswerWorker(authEngine.wsUrl, WORKER_MODE, tokens.answer);
    const fnWorker = startAnswerWorker(fnEngine.wsUrl, "authfn", tokens.authfn);
    workers.push(authWorker, fnWorker);
    await untilCallable(authEngine.wsUrl, "bench::echo", authWorker, bearer(tokens.caller));
    // …and that the callers' grant is checked on each call: outside its `call` list is refused.
    const outside = await callOnce(authEngine.wsUrl, "admin::reset", {}, bearer(tokens.caller));
    if (CALLER_GRANT.call && outside.error?.code !== "forbidden")
      throw new Error(`a call outside the grant was not refused: ${JSON.stringify(outside)}`);
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await connectOnce(`${fnEngine.wsUrl}/`, AUTHFN_HEADERS);
        break;
      } catch (e) {
        if (fnWorker.exitCode !== null) throw new Error("the auth-function worker exited");
        if (Date.now() > deadline) throw new Error(`the AUTH_FUNCTION engine never admitted a connect: ${e.message}`);
        await sleep(200);
      }
    }
  }

  if (WITH_BASE) {
    // The relay baseline's responder, also in its own process.
    const relay = startAnswerWorker(engine.wsUrl, "relay");
    workers.push(relay);
    await sleep(500);
    if (relay.exitCode !== null) throw new Error("relay responder exited");
  }

  const targets = {
    echo: { kind: "echo", wsUrl: engine.wsUrl },
    relay: { kind: "relay", wsUrl: engine.wsUrl },
    routed: { kind: "routed", wsUrl: engine.wsUrl },
    "routed+auth": { kind: "routed", wsUrl: authEngine?.wsUrl, headers: bearer(tokens.caller) },
  };
  const connectTargets = {
    open: { wsUrl: engine.wsUrl, headers: {} },
    token: { wsUrl: authEngine?.wsUrl, headers: bearer(tokens.caller) },
    "auth function": { wsUrl: fnEngine?.wsUrl, headers: AUTHFN_HEADERS },
  };
  const kinds = [...(WITH_BASE ? ["echo", "relay"] : []), "routed", ...(WITH_AUTH ? ["routed+auth"] : [])];
  const results = {}; // results[kind][n] = [{rps,p50,p99}]
  const connects = {}; // connects[variant] = [{p50,p99}]
  for (let run = 1; run <= RUNS; run++) {
    for (const n of CONCURRENCY) {
      // Alternate the order so drift (thermal, GC, other load) does not favour one side; auth on
      // and off stay next to each other.
      const order = run % 2 ? kinds : [...kinds].reverse();
      for (const kind of order) {
        const r = { n, ...(await measure(targets[kind], n)) };
        ((results[kind] ??= {})[n] ??= []).push(r);
        printRun(run, kind, r);
      }
    }
    if (WITH_AUTH) {
      const variants = run % 2 ? ["open", "token", "auth function"] : ["auth function", "token", "open"];
      for (const v of variants) {
        const r = await measureConnect(connectTargets[v]);
        (connects[v] ??= []).push(r);
        console.log(
          `  run ${run}  connect ${v.padEnd(13)} ${r.count} sequential  p50 ${fmt(r.p50, 2).padStart(6)} ms  p99 ${fmt(r.p99, 2).padStart(6)} ms`,
        );
      }
    }
  }

  const m = (kind, n, key) => median(results[kind][n].map((r) => r[key]));
  const verdicts = [];
  if (WITH_BASE) {
    console.log(`\nMedians of ${RUNS} runs:`);
    console.log(
      "| callers | routed rt/s | routed p50 | routed p99 | echo rt/s | echo p50 | echo p99 | routed/echo rt/s | routed/echo p99 | relay rt/s | relay p99 | routed/relay rt/s |",
    );
    console.log("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (const n of CONCURRENCY) {
      const rr = m("routed", n, "rps"),
        rp50 = m("routed", n, "p50"),
        rp99 = m("routed", n, "p99");
      const er = m("echo", n, "rps"),
        ep50 = m("echo", n, "p50"),
        ep99 = m("echo", n, "p99");
      const lr = m("relay", n, "rps"),
        lp99 = m("relay", n, "p99");
      const rpsRatio = rr / er,
        p99Ratio = rp99 / ep99;
      console.log(
        `| ${n} | ${fmt(rr)} | ${fmt(rp50, 2)} ms | ${fmt(rp99, 2)} ms | ${fmt(er)} | ${fmt(ep50, 2)} ms | ${fmt(ep99, 2)} ms | ${fmt(rpsRatio * 100)} % | ${fmt(p99Ratio, 2)}× | ${fmt(lr)} | ${fmt(lp99, 2)} ms | ${fmt((rr / lr) * 100)} % |`,
      );
      if (n === 1 || n === 100)
        verdicts.push(
          `routed/raw rt/s at ${n} caller${n > 1 ? "s" : ""}: ${fmt(rpsRatio * 100)} % (target ≥ ${TARGET_RPS_RATIO * 100} %) ${rpsRatio >= TARGET_RPS_RATIO ? "PASS" : "MISS"}`,
        );
      if (n === 100)
        verdicts.push(
          `routed p99 / raw p99 at 100 callers: ${fmt(p99Ratio, 2)}× (target ≤ ${TARGET_P99_RATIO}×) ${p99Ratio <= TARGET_P99_RATIO ? "PASS" : "MISS"}`,
        );
    }
  }
  if (WITH_AUTH) {
    console.log(`\nRouted invoke, auth off (open engine) vs on (AUTH_SECRET, token grants), medians of ${RUNS} runs:`);
    console.log(
      `| callers | off rt/s | off p50 | off p99 | on rt/s | on p50 | on p99 | on/off rt/s | on/off p99 | per-run on/off rt/s |${WITH_BASE ? " echo rt/s |" : ""}`,
    );
    console.log(`|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|${WITH_BASE ? "--:|" : ""}`);
    for (const n of CONCURRENCY) {
      const or = m("routed", n, "rps"),
        op50 = m("routed", n, "p50"),
        op99 = m("routed", n, "p99");
      const ar = m("routed+auth", n, "rps"),
        ap50 = m("routed+auth", n, "p50"),
        ap99 = m("routed+auth", n, "p99");
      // Paired by run (the two were measured back to back): less drift than the ratio of medians.
      const paired = results["routed+auth"][n].map((r, i) => r.rps / results.routed[n][i].rps);
      const ratio = ar / or;
      console.log(
        `| ${n} | ${fmt(or)} | ${fmt(op50, 2)} ms | ${fmt(op99, 2)} ms | ${fmt(ar)} | ${fmt(ap50, 2)} ms | ${fmt(ap99, 2)} ms | ${fmt(ratio * 100, 1)} % | ${fmt(ap99 / op99, 2)}× | ${paired.map((x) => fmt(x * 100, 1)).join(" / ")} % |${WITH_BASE ? ` ${fmt(m("echo", n, "rps"))} |` : ""}`,
      );
      const cost = 1 - median(paired);
      verdicts.push(
        `auth per-call cost at ${n} caller${n > 1 ? "s" : ""} (1 − median paired on/off rt/s): ${fmt(cost * 100, 1)} % (target ≤ ${TARGET_AUTH_COST * 100} %) ${cost <= TARGET_AUTH_COST ? "PASS" : "MISS"}`,
      );
    }
    console.log(`\nConnect (new WebSocket → workerregistered), ${CONNECTS} sequential connects per run, medians of ${RUNS} runs:`);
    console.log("| connect | p50 | p99 | p50 − open |");
    console.log("|---|--:|--:|--:|");
    const c = (v, key) => median(connects[v].map((r) => r[key]));
    for (const v of ["open", "token", "auth function"]) {
      console.log(
        `| ${v === "open" ? "open engine, no token" : v === "token" ? "AUTH_SECRET, bearer token" : "AUTH_FUNCTION (bench::auth)"} | ${fmt(c(v, "p50"), 2)} ms | ${fmt(c(v, "p99"), 2)} ms | ${v === "open" ? "—" : `${fmt(c(v, "p50") - c("open", "p50"), 2)} ms`} |`,
      );
    }
    const extra = c("token", "p50") - c("open", "p50");
    verdicts.push(
      `connect with a token, extra p50: ${fmt(extra, 2)} ms (target ≤ ${TARGET_TOKEN_CONNECT_MS} ms) ${extra <= TARGET_TOKEN_CONNECT_MS ? "PASS" : "MISS"}`,
    );
  }
  console.log("");
  for (const v of verdicts) console.log(v);
  if (WITH_AUTH)
    console.log(
      "(auth on and off run on two engines; on a shared machine their paired 3-s runs differ by ±20 % or more even when both are open — `node --conditions=iii-edge-source tests/bench/auth-micro.ts` measures the check itself)",
    );
  if (process.env.BENCH_DEBUG) for (const e of [engine, authEngine, fnEngine]) if (e) console.log(e.log());
  for (const w of workers) w.kill("SIGTERM");
  cleanup();
  await sleep(300);
  for (const e of [engine, authEngine, fnEngine]) if (e) rmSync(e.persist, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  cleanup();
  process.exit(1);
});
