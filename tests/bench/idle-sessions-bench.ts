// `npm run bench` (the harness part; alone: `npm run -s bench:idle-sessions`): what an idle agent
// session costs at rest on exactly `npm start` (every built-in worker inside the deployed Worker),
// with a zero-latency provider replay. N sessions each run one short finished turn (one user message,
// the replayed model answers a short text), then the engine idles and we measure:
//   - storage: the engine object's SQLite (turn records, run requests, `agent::events`, queue
//     receipts) and the local D1 database (the session tree, its owners, trace spans), each as the
//     files on disk (main and -wal apart) and as a checkpointed copy (see `snapshot`), whose pages
//     and rows are read per table with node:sqlite: WHICH rows an idle session leaves, and how big;
//   - memory: the resident set of the workerd that runs the Worker and its Durable Objects, idle,
//     before and after the N sessions, and after a restart (what the sessions cost a freshly woken
//     engine: the restarted engine against the freshly started one).
// Today the session is no keyed worker: every session's state sits in the one engine object and in
// D1. The same script measures the keyed design (one object per session) when it lands.
// Options (env): BENCH_SESSIONS (1000), BENCH_CONCURRENCY (4 turns at once), BENCH_WARMUP_SESSIONS
// (5, run before the baseline, so code warm-up is not charged to the sessions), BENCH_IDLE_MS (2000),
// BENCH_LONG_IDLE_MS (30000: the loaded engine left alone with no socket open, before its restart),
// BENCH_KEEP_STATE=1 (leave the state dir for a look at the rows; its path is printed).
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { registerWorker, type IIIClient } from "iii-sdk";
import { reply, say } from "@iii-edge/test-support/provider-replay";
import { postTurn, registered, startHarnessBench, TURN_TIMEOUT_MS, waitFor } from "./harness-engine.ts";
import { fmt } from "./stats.ts";
import { runtimeOf, usage } from "./ws-sink/common.mjs";

const N = Number(process.env.BENCH_SESSIONS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const WARMUP = Number(process.env.BENCH_WARMUP_SESSIONS ?? 5);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 2000);
/** How long the loaded engine then idles with no caller connected, its RSS sampled every 10 s. */
const LONG_IDLE_MS = Number(process.env.BENCH_LONG_IDLE_MS ?? 30_000);
const KEEP_STATE = process.env.BENCH_KEEP_STATE === "1";
/** What the harness serves once `npm start` is up: a session's turn needs both. */
const HARNESS_READY = ["run::start", "run::status", "provider::openai::stream"];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- memory --------------------------------------------------------------------------------------

/**
 * The workerd that runs this engine's Worker and objects. `npm start` runs in a process group of its
 * own (engine-server.ts), found by the wrangler in it that persists to `stateDir`; in that group,
 * `runtimeOf` tells the runtime from wrangler's proxy, which listens on the engine's port.
 */
function runtimePid(stateDir: string, port: number): number {
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(stateDir)) continue;
      const runtime = runtimeOf(usage(Number(pid)).pgid, port);
      if (runtime !== undefined) return runtime;
    } catch {
      // gone
    }
  }
  throw new Error(`no workerd runtime found for the engine on port ${port} (state ${stateDir})`);
}

/** `usage` gives MiB (VmRSS's KiB ÷ 1024): back to KiB, exactly. */
const rssKiB = (pid: number): number => usage(pid).rss * 1024;

// ---- storage -------------------------------------------------------------------------------------

/** The two databases an idle session lives in, under the state dir (miniflare's layout: one SQLite
 * file per object, named by a hash, beside the namespace's metadata.sqlite). */
const DATABASES = { engine: "v3/do/iii-edge-Engine", d1: "v3/d1/miniflare-D1DatabaseObject" } as const;
type Db = keyof typeof DATABASES;

/** The database file of `db` (the only one beside metadata.sqlite: one engine object, one D1). */
function dbFile(stateDir: string, db: Db): string {
  const dir = path.join(stateDir, DATABASES[db]);
  const mains = readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite");
  if (mains.length !== 1) throw new Error(`${dir}: expected one database, found ${mains.join(", ") || "none"}`);
  return path.join(dir, mains[0]!);
}

const sizeOf = (f: string) => (existsSync(f) ? statSync(f).size : 0);

interface OnDisk {
  main: number;
  wal: number;
}
const onDisk = (file: string): OnDisk => ({ main: sizeOf(file), wal: sizeOf(`${file}-wal`) });

/** What one group of rows holds: rows, and the bytes of the values they carry (a JSON document). */
interface Group {
  rows: number;
  valueBytes: number;
}

interface Snapshot {
  /** page_count × page_size after the WAL is checkpointed into the copy: what the rows take. */
  bytes: number;
  /** Bytes of b-tree pages per table, its indexes included (dbstat). */
  tableBytes: Map<string, number>;
  /** Rows per table, and per table:group where a column says what the row is for. */
  groups: Map<string, Group>;
}

/** Where a table's rows split by what they are for: the engine's state by scope, streams by name,
 * trace spans by whether they belong to a session; `value` is the column the row's bytes sit in. */
const SPLITS: Record<string, { by: string; value: string }> = {
  state: { by: "scope", value: "value" },
  stream_items: { by: "stream_name", value: "value" },
  queue_receipts: { by: "queue", value: "receipt" },
  spans: { by: "CASE WHEN session_id IS NULL THEN '(no session)' ELSE '(a session)' END", value: "doc" },
  logs: { by: "service_name", value: "doc" },
  harness_session_entries: { by: "kind", value: "body" },
};

/**
 * Read `file` as it stands: copy it with its -wal (the engine is idle, so the pair is consistent),
 * checkpoint the copy's WAL into it and measure that. The files on disk are not a steady measure of
 * what the rows take: workerd keeps the WAL (and checkpoints it when it passes 1,000 pages), so the
 * -wal file holds up to ~4 MB of pages the main file has or will have again.
 */
function snapshot(file: string): Snapshot {
  const dir = mkdtempSync(path.join(tmpdir(), "iii-idle-sessions-"));
  try {
    const copy = path.join(dir, "db.sqlite");
    copyFileSync(file, copy);
    if (existsSync(`${file}-wal`)) copyFileSync(`${file}-wal`, `${copy}-wal`);
    const db = new DatabaseSync(copy);
    try {
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      const pages = (db.prepare("PRAGMA page_count").get() as { page_count: number }).page_count;
      const pageSize = (db.prepare("PRAGMA page_size").get() as { page_size: number }).page_size;
      const tableBytes = new Map<string, number>();
      const stat = db.prepare(
        "SELECT s.tbl_name AS t, SUM(d.pgsize) AS b FROM dbstat d JOIN sqlite_schema s ON s.name = d.name GROUP BY s.tbl_name",
      );
      for (const r of stat.all() as { t: string; b: number }[]) tableBytes.set(r.t, r.b);
      const groups = new Map<string, Group>();
      const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as { name: string }[];
      for (const { name } of tables) {
        const rows = (db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n;
        groups.set(name, { rows, valueBytes: NaN });
        const split = SPLITS[name];
        if (!split) continue;
        const q = `SELECT ${split.by} AS g, COUNT(*) AS n, SUM(LENGTH(${split.value})) AS b FROM "${name}" GROUP BY 1`;
        for (const r of db.prepare(q).all() as { g: string; n: number; b: number }[])
          groups.set(`${name}: ${r.g}`, { rows: r.n, valueBytes: r.b });
      }
      return { bytes: pages * pageSize, tableBytes, groups };
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---- the run -------------------------------------------------------------------------------------

const { replay, engine, iii: firstCaller } = await startHarnessBench("idle-sessions-bench");
let iii: IIIClient = firstCaller;

/** A UI following `sid`'s `agent::events` (a `/_iii/streams` join): `joined` at the stream's sync,
 * `ended` at `agent_end`; `close` leaves, so nothing of it outlives the session. */
function follow(sid: string): { joined: Promise<void>; ended: Promise<void>; close(): void } {
  const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
  let onJoined!: () => void;
  let failJoin!: (e: Error) => void;
  let onEnded!: () => void;
  const joined = new Promise<void>((resolve, reject) => ((onJoined = resolve), (failJoin = reject)));
  const ended = new Promise<void>((r) => (onEnded = r));
  ws.onopen = () => ws.send(JSON.stringify({ type: "join", data: { subscriptionId: sid, streamName: "agent::events", groupId: sid } }));
  ws.onmessage = (m) => {
    const p = JSON.parse(String(m.data)) as { event: { type: string; data?: { type?: string } } };
    if (p.event.type === "sync") onJoined();
    else if (p.event.type === "create" && p.event.data?.type === "agent_end") onEnded();
  };
  ws.onerror = () => failJoin(new Error(`${sid}: stream socket failed`));
  return { joined, ended, close: () => ws.close() };
}

const runState = async (sid: string) =>
  ((await iii.trigger({ function_id: "run::status", payload: { session_id: sid } })) as { state?: string } | null)?.state;

/** Followers that never saw their turn's `agent_end`, though the run stopped and the event is stored. */
const missedEnds: string[] = [];

/**
 * One session with one finished turn: the replay answers a short text; it is done when a follower
 * sees `agent_end` and `run::status` says `stopped`. The follower is what ends the wait (a poll would
 * add its own calls, spans and load to what is measured); a slow poll of `run::status` is the
 * fallback, since a follower has been seen to miss `agent_end` (counted in `missedEnds`).
 */
async function session(sid: string): Promise<void> {
  replay.enqueue("openai", reply(say("Hello from an idle session.")));
  const f = follow(sid);
  try {
    await f.joined;
    await postTurn(engine, sid);
    let seen = false;
    void f.ended.then(() => (seen = true));
    for (const deadline = Date.now() + TURN_TIMEOUT_MS; !seen; ) {
      await Promise.race([f.ended, sleep(2000)]);
      if (seen || (await runState(sid)) !== "stopped") {
        if (Date.now() > deadline) throw new Error(`turn ${sid} did not end within ${TURN_TIMEOUT_MS} ms`);
        continue;
      }
      // Stopped: `agent_end` follows the record's last write; give it a moment to arrive.
      await Promise.race([f.ended, sleep(1000)]);
      if (!seen) missedEnds.push(sid);
      break;
    }
    await waitFor(`${sid} stopped`, async () => (await runState(sid)) === "stopped");
  } finally {
    f.close();
  }
}

/** `count` sessions `<prefix>-<n>`, at most CONCURRENCY turns at once. */
async function sessions(prefix: string, count: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await session(`${prefix}-${++next}`);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count) }, lane));
}

/** The engine's own gauges (`engine::metrics::list`), as `name=value`. */
async function gauges(): Promise<string> {
  const r = (await iii.trigger({ function_id: "engine::metrics::list", payload: {} })) as {
    metrics: { name: string; type: string; value?: number }[];
  };
  return r.metrics
    .filter((m) => m.type === "gauge")
    .map((m) => `${m.name}=${m.value}`)
    .join(" ");
}

interface AtRest {
  rss: number;
  disk: Record<Db, OnDisk>;
  gauges: string;
}

/**
 * The engine at rest: idle IDLE_MS, then the files on disk measured twice IDLE_MS apart (they must
 * agree: an idle engine writes nothing), workerd's RSS and the engine's gauges.
 */
async function atRest(what: string): Promise<AtRest> {
  await sleep(IDLE_MS);
  const read = () => ({ engine: onDisk(dbFile(engine.stateDir, "engine")), d1: onDisk(dbFile(engine.stateDir, "d1")) });
  const first = read();
  await sleep(IDLE_MS);
  const disk = read();
  if (JSON.stringify(first) !== JSON.stringify(disk))
    console.log(`  (${what}: the files still changed over ${IDLE_MS} ms: ${JSON.stringify(first)} → ${JSON.stringify(disk)})`);
  const r: AtRest = { rss: rssKiB(runtimePid(engine.stateDir, engine.port)), disk, gauges: await gauges() };
  console.log(`  ${what}: workerd RSS ${r.rss} KiB; ${r.gauges}`);
  return r;
}

const kib = (b: number) => fmt(b / 1024, 1);
const perSession = (before: number, after: number) => fmt((after - before) / N, 0);

try {
  await registered(iii, HARNESS_READY);
  console.log(
    `iii-edge idle-sessions bench: npm start, zero-latency OpenAI replay, ${N} sessions × one short finished turn (${CONCURRENCY} at once, after ${WARMUP} warm-up sessions); load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`,
  );
  const fresh = await atRest("fresh engine");
  await sessions("warmup", WARMUP);
  const base = await atRest(`after ${WARMUP} warm-up sessions`);
  const baseSnap = { engine: snapshot(dbFile(engine.stateDir, "engine")), d1: snapshot(dbFile(engine.stateDir, "d1")) };
  const t0 = performance.now();
  await sessions("idle", N);
  console.log(
    `  ${N} sessions in ${fmt((performance.now() - t0) / 1000)} s; followers that missed agent_end: ${missedEnds.length}${missedEnds.length ? ` (${missedEnds.join(", ")})` : ""}`,
  );
  const loaded = await atRest(`${N} idle sessions`);
  const loadedSnap = { engine: snapshot(dbFile(engine.stateDir, "engine")), d1: snapshot(dbFile(engine.stateDir, "d1")) };

  // Whether that memory goes when nothing is connected: the caller leaves (its socket was the last
  // one), and the engine idles on.
  await iii.shutdown();
  const pid = runtimePid(engine.stateDir, engine.port);
  const alone: string[] = [];
  for (let t = 10_000; t <= LONG_IDLE_MS; t += 10_000) {
    await sleep(10_000);
    alone.push(`${t / 1000} s ${rssKiB(pid)} KiB`);
  }
  const lastAlone = rssKiB(pid);
  console.log(`  no socket open: workerd RSS after ${alone.join(", ")}`);

  // A freshly woken engine: the same state dir, started again; a caller's first calls wake the object.
  await engine.restart();
  iii = registerWorker(engine.wsUrl, { workerName: "idle-sessions-bench-caller", otel: { enabled: false } });
  await registered(iii, HARNESS_READY);
  const kept = await runState(`idle-${N}`);
  if (kept !== "stopped") throw new Error(`after the restart, idle-${N} is ${kept}, not stopped`);
  const restarted = await atRest(`restarted (${N + WARMUP} sessions stored)`);

  console.log(`\nPer idle session (after − before, ÷ ${N}):`);
  console.log("| measure | before | after | per session |");
  console.log("|---|--:|--:|--:|");
  for (const db of ["engine", "d1"] as const) {
    const name = db === "engine" ? "engine object SQLite" : "D1 database";
    const [b, a] = [baseSnap[db].bytes, loadedSnap[db].bytes];
    console.log(`| ${name}, checkpointed | ${kib(b)} KiB | ${kib(a)} KiB | ${perSession(b, a)} B |`);
    const [bd, ad] = [base.disk[db], loaded.disk[db]];
    console.log(`| ${name} on disk: main file | ${kib(bd.main)} KiB | ${kib(ad.main)} KiB | ${perSession(bd.main, ad.main)} B |`);
    console.log(`| ${name} on disk: -wal file | ${kib(bd.wal)} KiB | ${kib(ad.wal)} KiB | (not per session) |`);
  }
  console.log(
    `| workerd RSS, idle (warm-up → ${N} sessions) | ${base.rss} KiB | ${loaded.rss} KiB | ${fmt((loaded.rss - base.rss) / N, 2)} KiB |`,
  );
  console.log(
    `| workerd RSS, then ${LONG_IDLE_MS / 1000} s more with no socket open | ${base.rss} KiB | ${lastAlone} KiB | ${fmt((lastAlone - base.rss) / N, 2)} KiB |`,
  );
  console.log(
    `| workerd RSS, idle (fresh start → restart with them stored) | ${fresh.rss} KiB | ${restarted.rss} KiB | ${fmt((restarted.rss - fresh.rss) / N, 2)} KiB |`,
  );

  console.log(`\nRows an idle session leaves (after − before, ÷ ${N}; value = bytes of the row's JSON column):`);
  console.log("| database | table: group | rows / session | value bytes / session | table pages / session |");
  console.log("|---|---|--:|--:|--:|");
  for (const db of ["engine", "d1"] as const) {
    const [b, a] = [baseSnap[db], loadedSnap[db]];
    for (const [key, g] of a.groups) {
      const was = b.groups.get(key) ?? { rows: 0, valueBytes: 0 };
      const rows = (g.rows - was.rows) / N;
      if (rows === 0) continue;
      const table = key.split(":")[0]!;
      const pages = key.includes(":") ? "" : `${perSession(b.tableBytes.get(table) ?? 0, a.tableBytes.get(table) ?? 0)} B`;
      const value = Number.isNaN(g.valueBytes) ? "" : fmt((g.valueBytes - (was.valueBytes || 0)) / N, 0);
      console.log(`| ${db === "engine" ? "engine object" : "D1"} | ${key} | ${fmt(rows, 2)} | ${value} | ${pages} |`);
    }
  }
} finally {
  await iii.shutdown().catch(() => {});
  await engine.stop();
  await replay.close();
  if (KEEP_STATE) console.log(`\nstate dir kept: ${engine.stateDir}`);
  else rmSync(engine.stateDir, { recursive: true, force: true });
}
