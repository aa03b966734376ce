// The durable queue (engine-do/src/core/queues/durable-queue.ts) when the runtime refuses a timer
// (workerd: "QuotaExceededError: max active timeouts"): the message is kept, the alarm delivers
// it, and once timers work again the queue pumps by timer as before (it used to stay marked
// "kicked" after the failure and never pump again). The core runs over Node's SQLite.
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import type { EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql, trackedTimers } from "@iii-edge/test-support/node-sql";
import { DurableQueues, type QueueConfig } from "@iii-edge/engine-do/core/queues/durable-queue.ts";
import { eventually } from "@iii-edge/test-support/wait";

const QUEUE: QueueConfig = {
  name: "jobs",
  backend: "durable",
  max_retries: 3,
  backoff_ms: 10,
  concurrency: 10,
  type: "standard",
  timeout_ms: 5_000,
};

const timers = new Set<ReturnType<typeof setTimeout>>();
afterEach(() => {
  for (const h of timers) clearTimeout(h);
  timers.clear();
});

function setup() {
  const db = new DatabaseSync(":memory:");
  const state = { timersFail: false, alarmAt: null as number | null, warnings: [] as string[] };
  const ports: EnginePorts = {
    namespace: "default",
    sql: nodeSql(db),
    clock: { now: () => Date.now() },
    timers: trackedTimers(timers, () => {
      if (state.timersFail) throw new DOMException("max active timeouts", "QuotaExceededError");
    }),
    alarm: {
      request: (at) => {
        state.alarmAt = at;
      },
    },
    log: { info: () => {}, warn: (msg) => void state.warnings.push(msg) },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
  };
  const core = new EngineCore(ports);
  const delivered: unknown[] = [];
  core.addBuiltin({ id: "jobs::run", description: "records its input", handler: (data) => void delivered.push(data) });
  const queues = new DurableQueues(core, (name) => (name === QUEUE.name ? QUEUE : undefined));
  core.addAlarmClient(queues);
  core.start([]);
  const push = (n: number) => queues.push(QUEUE, { queue: QUEUE.name, function_id: "jobs::run", data: { n } }, `msg-${n}`);
  return { core, queues, state, delivered, push };
}

describe("durable queue: a timer that cannot be set", () => {
  it("keeps the message, falls back to the alarm, and pumps by timer again once timers work", async () => {
    const { core, queues, state, delivered, push } = setup();

    state.timersFail = true;
    expect(push(1)).toEqual({ ok: true }); // used to throw out of push()
    expect(queues.depth()).toBe(1);
    expect(delivered).toEqual([]);
    expect(state.alarmAt).not.toBeNull();
    expect(state.warnings).toEqual(["durable queue: no timer, delivering on the alarm"]);
    // A second failure in a row is not logged again.
    expect(push(2)).toEqual({ ok: true });
    expect(state.warnings).toHaveLength(1);

    // The alarm delivers what is due.
    await core.alarm();
    await eventually(() => delivered.length === 2, 2_000, "delivery on the alarm");
    expect(delivered).toEqual([{ n: 1 }, { n: 2 }]);
    await eventually(() => queues.depth() === 0, 2_000, "the queue drained");

    // Timers work again: the next message is pumped by its timer, no alarm needed.
    state.timersFail = false;
    state.alarmAt = null;
    push(3);
    await eventually(() => delivered.length === 3, 2_000, "delivery by timer after the failure");
    expect(delivered[2]).toEqual({ n: 3 });
  });
});
