// What the in-process micro benches share (auth-micro.ts, trace-micro.ts, wake-micro.ts,
// parse-micro.ts): engine ports over node:sqlite with no-op alarm/log, and a core with one answering
// worker and one caller that makes sequential routed calls. Needs `node --conditions=iii-edge-source` (workspace sources).
import { DatabaseSync } from "node:sqlite";
import type { EngineFrame } from "@iii-edge/protocol";
import type { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import type { Conn, EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql } from "@iii-edge/test-support/node-sql";

export interface MemoryPortsOptions {
  /** The SQLite the core stores in; default a fresh in-memory one (pass one to share it across instances). */
  db?: DatabaseSync;
  /** How many times faster than the wall clock the core's clock runs (1: real time). */
  clockRate?: number;
  /** How many times sooner than asked the core's timers fire (1: as asked). */
  timerRate?: number;
}

/** Ports for an EngineCore in plain Node: node:sqlite, real timers, no alarm, silent log. */
export function memoryPorts(opts: MemoryPortsOptions = {}): EnginePorts {
  const { db = new DatabaseSync(":memory:"), clockRate = 1, timerRate = 1 } = opts;
  return {
    namespace: "default",
    sql: nodeSql(db),
    clock: { now: clockRate === 1 ? () => Date.now() : () => Date.now() * clockRate },
    timers: {
      set: timerRate === 1 ? (fn, ms) => setTimeout(fn, ms) : (fn, ms) => setTimeout(fn, ms / timerRate),
      clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
    },
    alarm: { request: () => {} },
    log: { info: () => {}, warn: () => {} },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
  };
}

export interface EchoCallsOptions {
  /** connect() options of the answering worker and of the caller (e.g. their grants). */
  answerConnect?: Parameters<EngineCore["connect"]>[2];
  callerConnect?: Parameters<EngineCore["connect"]>[2];
  /** Throw when a call comes back with an error (default: count it as answered). */
  throwOnError?: boolean;
}

/**
 * Connects an answering worker (`bench::echo`, answered in a later event, as a socket would: the
 * core files the call after sending it) and a caller ("caller") to a started `core`; `run(n)` makes
 * `n` routed calls one after the other (the next sent when the result arrived), µs per call.
 */
export function echoCalls(core: EngineCore, opts: EchoCallsOptions = {}): (n: number) => Promise<number> {
  let onResult: () => void = () => {};
  const answer: Conn = {
    workerId: "answer",
    send(f: EngineFrame) {
      if (f.type === "invokefunction" && f.invocation_id) {
        const id = f.invocation_id,
          data = JSON.stringify(f.data);
        setImmediate(() =>
          core.message(answer, `{"type":"invocationresult","invocation_id":"${id}","function_id":"bench::echo","result":${data}}`),
        );
      }
      return true;
    },
    close() {},
  };
  const caller: Conn = {
    workerId: "caller",
    send(f: EngineFrame) {
      if (f.type === "invocationresult") {
        if (opts.throwOnError && f.error) throw new Error(JSON.stringify(f.error));
        onResult();
      }
      return true;
    },
    close() {},
  };
  if (opts.answerConnect) core.connect(answer, "a", opts.answerConnect);
  else core.connect(answer, "a");
  if (opts.callerConnect) core.connect(caller, "c", opts.callerConnect);
  else core.connect(caller, "c");
  core.message(answer, JSON.stringify({ type: "registerfunction", id: "bench::echo" }));
  let seq = 0;
  return (n: number) =>
    new Promise<number>((resolve) => {
      let left = n;
      const t0 = performance.now();
      const send = () => {
        seq++;
        core.message(
          caller,
          `{"type":"invokefunction","invocation_id":"c-${seq}","function_id":"bench::echo","data":{"caller":0,"seq":${seq}}}`,
        );
      };
      onResult = () => {
        if (--left === 0) resolve(((performance.now() - t0) * 1000) / n);
        else setImmediate(send);
      };
      send();
    });
}
