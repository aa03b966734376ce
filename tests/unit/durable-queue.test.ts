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
  // The statements of each transaction, to see which results one write stores.
  const writes: string[][] = [];
  const base = nodeSql(db);
  let open: string[] | null = null;
  const sql: EnginePorts["sql"] = {
    exec: (query, ...bindings) => {
      open?.push(query);
      return base.exec(query, ...bindings);
    },
    transaction: (fn) => {
      open = [];
      try {
        return base.transaction(fn);
      } finally {
        writes.push(open);
        open = null;
      }
    },
  };
  const state = { timersFail: false, alarmAt: null as number | null, warnings: [] as string[] };
  const ports: EnginePorts = {
    namespace: "default",
    sql,
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
  return { core, queues, state, delivered, push, writes };
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

describe("durable queue: a result frees its slot before its deletion is written", () => {
  it("starts the next message at once, never delivers the answered one again, and writes the deletions in one go", async () => {
    // Concurrency 4: the deletions of up to deletionAllowance(4) - 1 = 1 delivered message wait for
    // their flush; the second result writes both.
    const cfg: QueueConfig = { ...QUEUE, name: "gated", concurrency: 4 };
    const { core } = setup();
    const gates = new Map<number, () => void>();
    const started: number[] = [];
    core.addBuiltin({
      id: "gated::run",
      description: "runs until the test opens its gate",
      handler: (data) =>
        new Promise<void>((open) => {
          const n = (data as { n: number }).n;
          started.push(n);
          gates.set(n, open);
        }),
    });
    const settled: string[] = [];
    const queues = new DurableQueues(core, (name) => (name === cfg.name ? cfg : undefined));
    queues.onSettled = (id) => void settled.push(id);
    const stored = () => core.ports.sql.exec<{ id: string }>("SELECT id FROM queue_messages ORDER BY seq").map((r) => r.id);
    for (let n = 1; n <= 6; n++) queues.push(cfg, { queue: cfg.name, function_id: "gated::run", data: { n } }, `g-${n}`);

    await eventually(() => started.length === 4, 2_000, "the window filled");
    expect(started).toEqual([1, 2, 3, 4]);

    // One result: message 5 starts in the same turn of events, while message 1's row is still stored
    // (its deletion waits for the flush) and is not handed out again.
    gates.get(1)!();
    await eventually(() => started.length === 5, 2_000, "the freed slot refilled");
    expect(started).toEqual([1, 2, 3, 4, 5]);
    expect(stored()).toEqual(["g-1", "g-2", "g-3", "g-4", "g-5", "g-6"]);
    expect(queues.depth(cfg.name)).toBe(5);
    expect(settled).toEqual([]);

    // The second result reaches the allowance: both deletions are written in one flush.
    gates.get(2)!();
    await eventually(() => settled.length === 2, 2_000, "both deletions written");
    expect(stored()).toEqual(["g-3", "g-4", "g-5", "g-6"]);
    await eventually(() => started.length === 6, 2_000, "the last message started");

    for (const n of [3, 4, 5, 6]) gates.get(n)!();
    await eventually(() => queues.depth(cfg.name) === 0 && stored().length === 0, 2_000, "the queue drained");
    // Each message was handed to its handler exactly once.
    expect(started.sort()).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe("durable queue: failed attempts are written in bulk", () => {
  it("stores the retries of results that come together in one write, then retries each after its backoff", async () => {
    // Concurrency 4: two unwritten results reach deletionAllowance(4) = 2, which writes them at once.
    const cfg: QueueConfig = { ...QUEUE, name: "flaky", concurrency: 4, backoff_ms: 20 };
    const { core, writes, state } = setup();
    let failing = true;
    const attempts = new Map<number, number>();
    core.addBuiltin({
      id: "flaky::run",
      description: "fails while the test says so",
      handler: (data) => {
        const n = (data as { n: number }).n;
        attempts.set(n, (attempts.get(n) ?? 0) + 1);
        if (failing) throw new Error(`attempt of ${n} failed`);
      },
    });
    const queues = new DurableQueues(core, (name) => (name === cfg.name ? cfg : undefined));
    core.addAlarmClient(queues);
    const stored = (id: string) =>
      core.ports.sql.exec<{ attempts: number; last_error: string | null }>(
        "SELECT attempts, last_error FROM queue_messages WHERE id = ?",
        id,
      )[0];
    const reported: [string, string, number | undefined][] = [];
    queues.onSettled = (id, outcome) => {
      reported.push([id, outcome, stored(id)?.attempts]);
      // The second attempts succeed.
      if (reported.length === 2) failing = false;
    };
    for (const n of [1, 2]) queues.push(cfg, { queue: cfg.name, function_id: "flaky::run", data: { n } }, `f-${n}`);

    await eventually(() => reported.length === 2, 2_000, "both failures written");
    // Reported once stored, each with its raised attempt count and its error.
    expect(reported.sort()).toEqual([
      ["f-1", "retry", 1],
      ["f-2", "retry", 1],
    ]);
    expect(stored("f-1")?.last_error).toMatch(/attempt of 1 failed/);
    // One transaction wrote both retries.
    const retryWrites = writes.filter((w) => w.some((q) => q.startsWith("UPDATE queue_messages SET attempts")));
    expect(retryWrites).toHaveLength(1);
    expect(retryWrites[0]!.filter((q) => q.startsWith("UPDATE queue_messages SET attempts"))).toHaveLength(2);

    // The retries are due at their backoff: the stored alarm says when (here the test fires it).
    const at = state.alarmAt;
    expect(at).not.toBeNull();
    await eventually(() => Date.now() >= at!, 2_000, "the retries' backoff over");
    await core.alarm();
    await eventually(() => queues.depth(cfg.name) === 0, 2_000, "both delivered on their retry");
    expect([...attempts].sort()).toEqual([
      [1, 2],
      [2, 2],
    ]);
  });
});
