// The engine core's own cost of a queued message against a routed call, in plain Node away from
// workerd's noise (fake ports, node:sqlite in memory, as auth-micro.ts): a flood of FLOOD enqueue
// frames (ENQUEUE_WINDOW outstanding) on a durable queue of concurrency 10 delivered to a worker
// that answers each call in a later turn, against 10 closed-loop routed callers of the same worker.
// Also counts SQL statements per message. Not part of `npm run bench`; usage:
//   node --conditions=iii-edge-source tests/bench/queue-core-micro.ts
import { DatabaseSync } from "node:sqlite";
import type { EngineFrame } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { Conn, EnginePorts, Sql, SqlValue } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql } from "@iii-edge/test-support/node-sql";
import { fmt, median } from "./stats.ts";

const FLOOD = Number(process.env.MICRO_FLOOD ?? 1000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 7);
const ENQUEUE_WINDOW = 50;
const CALLERS = 10;
let statements = 0;
/** CPU time of this process (user + system), ms: on a shared, loaded machine wall time mostly measures the others. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** node-sql.ts, with prepared statements cached by text as workerd's `sql.exec` caches them (so
 * the figures are the statements' execution, not their compilation). */
function cachedSql(db: DatabaseSync): Sql {
  const base = nodeSql(db);
  const cache = new Map<string, ReturnType<DatabaseSync["prepare"]>>();
  return {
    exec: <T>(q: string, ...b: SqlValue[]) => {
      let st = cache.get(q);
      if (!st) cache.set(q, (st = db.prepare(q)));
      return st.all(...(b as never[])) as T[];
    },
    transaction: base.transaction,
  };
}

function ports(): EnginePorts {
  const sql = cachedSql(new DatabaseSync(":memory:"));
  const counted: Sql = { exec: (q, ...b) => (statements++, sql.exec(q, ...b)), transaction: sql.transaction };
  return {
    namespace: "default",
    sql: counted,
    // Time runs 100× fast, so the per-connection frame limit never drops a frame here.
    clock: { now: () => Date.now() * 100 },
    timers: { set: (fn, ms) => setTimeout(fn, ms), clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>) },
    alarm: { request: () => {} },
    log: { info: () => {}, warn: (m, f) => console.warn(m, f) },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
  };
}

const core = new EngineCore(ports());
installEngine(core, { QUEUES: '{"jobs":{"backend":"durable","max_retries":3,"backoff_ms":1000,"concurrency":10}}' });
core.start([]);
let onDelivery = () => {};
const worker: Conn = {
  workerId: "handler",
  send(f: EngineFrame) {
    if (f.type === "invokefunction" && f.invocation_id) {
      const id = f.invocation_id;
      const queued = (f.data as { q?: number } | null)?.q === 1;
      setImmediate(() => {
        core.message(worker, `{"type":"invocationresult","invocation_id":"${id}","function_id":"bench::sink","result":null}`);
        if (queued) onDelivery();
      });
    }
    return true;
  },
  close() {},
};
const callbacks = new Map<string, () => void>();
const callers: Conn[] = Array.from({ length: CALLERS }, (_, i) => ({
  workerId: `caller-${i}`,
  send(f: EngineFrame) {
    if (f.type === "invocationresult") {
      if (f.error) throw new Error(JSON.stringify(f.error));
      callbacks.get(f.invocation_id)?.();
      callbacks.delete(f.invocation_id);
    }
    return true;
  },
  close() {},
}));
core.connect(worker, "w");
for (const c of callers) core.connect(c, c.workerId);
core.message(worker, JSON.stringify({ type: "registerfunction", id: "bench::sink" }));
let seq = 0;
const call = (c: Conn, frame: (id: string) => string, then: () => void) => {
  const id = `i${++seq}`;
  callbacks.set(id, then);
  core.message(c, frame(id));
};

/** µs of the core per delivered message (enqueue → delivery → ack), and SQL statements each. */
function flood(n: number): Promise<{ us: number; sql: number }> {
  return new Promise((resolve) => {
    const s0 = statements;
    const t0 = cpuMs();
    let sent = 0;
    let delivered = 0;
    onDelivery = () => {
      if (++delivered === n) setImmediate(() => resolve({ us: ((cpuMs() - t0) * 1000) / n, sql: (statements - s0) / n }));
    };
    const send = () => {
      if (sent++ >= n) return;
      call(
        callers[0]!,
        (id) =>
          `{"type":"invokefunction","invocation_id":"${id}","function_id":"bench::sink","data":{"q":1},"action":{"type":"enqueue","queue":"jobs"}}`,
        send,
      );
    };
    for (let i = 0; i < ENQUEUE_WINDOW; i++) send();
  });
}

/** µs of the core per routed call, CALLERS closed loops, n calls in all. */
function routed(n: number): Promise<{ us: number; sql: number }> {
  return new Promise((resolve) => {
    const s0 = statements;
    const t0 = cpuMs();
    let done = 0;
    for (const c of callers) {
      const loop = () => {
        if (++done === n) resolve({ us: ((cpuMs() - t0) * 1000) / n, sql: (statements - s0) / n });
        else if (done < n) call(c, (id) => `{"type":"invokefunction","invocation_id":"${id}","function_id":"bench::sink","data":{}}`, loop);
      };
      call(c, (id) => `{"type":"invokefunction","invocation_id":"${id}","function_id":"bench::sink","data":{}}`, loop);
    }
  });
}

await flood(FLOOD);
await routed(FLOOD); // warm-up (JIT)
const r: { flood: { us: number; sql: number }[]; routed: { us: number; sql: number }[] } = { flood: [], routed: [] };
for (let i = 0; i < ROUNDS; i++) {
  r.flood.push(await flood(FLOOD));
  r.routed.push(await routed(FLOOD));
}
const f = median(r.flood.map((x) => x.us)),
  c = median(r.routed.map((x) => x.us));
console.log(`engine core in Node ${process.version}, ${ROUNDS} rounds, medians:`);
console.log(
  `  flood of ${FLOOD} on a durable queue (concurrency 10): ${fmt(f)} µs CPU per message, ${fmt(median(r.flood.map((x) => x.sql)))} SQL statements each`,
);
console.log(
  `  routed call, ${CALLERS} closed-loop callers: ${fmt(c)} µs CPU per call, ${fmt(median(r.routed.map((x) => x.sql)))} SQL statements each`,
);
console.log(`  routed / flood cost = flood rate / routed rate in the core alone: ${fmt(c / f, 2)}×`);
process.exit(0);
