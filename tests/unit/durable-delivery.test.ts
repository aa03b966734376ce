// The durable queue and what state writes put on it, over Node's SQLite with the whole engine
// installed (installEngine), a fake clock and fake worker sockets:
// - state::set / state::update with `enqueue` and the state trigger fires are one transaction with
//   the write: a message row the database refuses takes the write back with it;
// - a delivery's lease (its queue's timeout_ms plus a margin) holds within an instance, and is void
//   after an eviction: the old instance's pending call is gone, so the new one delivers again at
//   once, with the same id;
// - a fifo head waiting on its retry backoff wakes the alarm at its own time, whatever else is in
//   flight.
// (An "eviction" is a new EngineCore over the same database and the same live sockets; the old
// instance's timers are cleared, as routed-calls.test.ts does.)
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql, trackedTimers, RecordingConn } from "@iii-edge/test-support/node-sql";
import { eventually } from "@iii-edge/test-support/wait";

const QUEUES = JSON.stringify({
  steps: {
    backend: "durable",
    type: "fifo",
    message_group_field: "session_id",
    timeout_ms: 400,
    max_retries: 3,
    backoff_ms: 200,
    concurrency: 10,
  },
  jobs: { backend: "durable", max_retries: 3, backoff_ms: 10 },
});

const clock = { t: Date.now() };
const live: (() => void)[] = [];
afterEach(() => live.splice(0).forEach((evict) => evict()));

/** One object instance over `db`: its own timers (cleared on eviction), the shared clock. */
function instance(db: DatabaseSync) {
  const handles = new Set<ReturnType<typeof setTimeout>>();
  const alarm = { at: null as number | null };
  const warnings: string[] = [];
  const ports: EnginePorts = {
    namespace: "default",
    sql: nodeSql(db),
    clock: { now: () => clock.t },
    timers: trackedTimers(handles),
    alarm: { request: (at) => void (alarm.at = at) },
    log: { info: () => {}, warn: (msg) => void warnings.push(msg) },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
  };
  const core = new EngineCore(ports);
  const installed = installEngine(core, { QUEUES });
  const evict = () => handles.forEach((h) => clearTimeout(h));
  live.push(evict);
  return { core, installed, alarm, warnings, evict };
}

const count = (db: DatabaseSync, sql: string) => (db.prepare(sql).get() as { n: number }).n;

describe("a state write and what it enqueues are one transaction", () => {
  it("a message row the database refuses takes the write (and its fires) back with it", async () => {
    const db = new DatabaseSync(":memory:");
    const { core } = instance(db);
    core.start([]);
    core.registerTrigger(null, { id: "t-rec", trigger_type: "state", function_id: "x::on", config: { scope: "s" } });
    // SQLite refuses any further queue row: the write must not survive its message's failure.
    db.exec("CREATE TRIGGER refuse_messages BEFORE INSERT ON queue_messages BEGIN SELECT RAISE(ABORT, 'queue full'); END");
    const set = await core.invoke({
      function_id: "state::set",
      data: { scope: "s", key: "k", value: 1, enqueue: { function_id: "x::job", queue: "jobs" } },
    });
    expect(set.ok).toBe(false);
    const upd = await core.invoke({
      function_id: "state::update",
      data: { scope: "s", key: "k", ops: [{ type: "set", path: "", value: 2 }] },
    });
    expect(upd.ok).toBe(false); // the trigger's fire is a queue row too
    expect(count(db, "SELECT COUNT(*) AS n FROM state")).toBe(0);
    db.exec("DROP TRIGGER refuse_messages");
    const ok = await core.invoke({
      function_id: "state::set",
      data: { scope: "s", key: "k", value: 3, enqueue: { function_id: "x::job", queue: "jobs" } },
    });
    expect(ok).toMatchObject({ ok: true, result: { old_value: null, new_value: 3, messageReceiptId: expect.any(String) } });
    // One row for the enqueue, one for the binding's fire (on its own queue).
    expect(db.prepare("SELECT queue, trigger_id FROM queue_messages ORDER BY queue").all()).toEqual([
      { queue: "jobs", trigger_id: null },
      { queue: "state:t-rec", trigger_id: "t-rec" },
    ]);
  });
});

describe("the fires waiting for one binding are bounded", () => {
  it("past 10 000 waiting fires (a handler failing for long) a new fire is dropped with a warning; other bindings still fire", async () => {
    const db = new DatabaseSync(":memory:");
    const { core, warnings } = instance(db);
    core.start([]);
    core.registerTrigger(null, { id: "t-stuck", trigger_type: "state", function_id: "x::stuck", config: { scope: "hot" } });
    core.registerTrigger(null, { id: "t-fine", trigger_type: "state", function_id: "x::fine", config: { scope: "hot" } });
    // A backlog as a handler failing for hours would leave (next_at far ahead: nothing is delivered).
    const insert = db.prepare(
      "INSERT INTO queue_messages (id, queue, function_id, data, next_at, group_key, enqueued_at, seq, trigger_id) VALUES (?, 'state:t-stuck', 'x::stuck', 'null', ?, 'g', 0, ?, 't-stuck')",
    );
    db.exec("BEGIN");
    for (let i = 0; i < 10_000; i++) insert.run(`old-${i}`, clock.t + 3_600_000, -i);
    db.exec("COMMIT");
    const r = await core.invoke({ function_id: "state::set", data: { scope: "hot", key: "k", value: 1 } });
    expect(r.ok).toBe(true);
    expect(count(db, "SELECT COUNT(*) AS n FROM queue_messages WHERE queue = 'state:t-stuck'")).toBe(10_000);
    expect(count(db, "SELECT COUNT(*) AS n FROM queue_messages WHERE queue = 'state:t-fine'")).toBe(1);
    expect(warnings).toContain("state trigger fire dropped: its binding has too many fires waiting");
  });
});

describe("a delivery's lease", () => {
  it("holds within an instance, and is void after an eviction: the new instance delivers again at once, same id", async () => {
    const db = new DatabaseSync(":memory:");
    const worker = new RecordingConn("worker-1");
    const first = instance(db);
    first.core.start([]);
    first.core.connect(worker, "token");
    first.core.message(worker, JSON.stringify({ type: "registerfunction", id: "step::run" }));
    const r = await first.core.enqueue({ queue: "steps", function_id: "step::run", data: { session_id: "s1" } });
    expect(r.ok).toBe(true);
    await eventually(() => worker.calls("step::run").length === 1, 2_000, "the first delivery");
    // Within the instance the leased message is never picked again, however often the alarm runs.
    await first.core.alarm();
    await new Promise((r) => setTimeout(r, 50));
    expect(worker.calls("step::run")).toHaveLength(1);
    first.evict();

    // A new instance over the same database; the worker's (hibernated) socket is still there, but the
    // call the old instance was waiting for can no longer be answered to anyone.
    const second = instance(db);
    second.core.start([worker]);
    await second.core.alarm();
    await eventually(() => worker.calls("step::run").length === 2, 2_000, "the redelivery");
    const [a, b] = worker.calls("step::run");
    expect(b!.invocation_id).toBe(a!.invocation_id);
  });
});

describe("a fifo head waiting on its backoff", () => {
  it("is due at its own retry time, not hidden behind later messages of its group while something else is in flight", async () => {
    const db = new DatabaseSync(":memory:");
    const worker = new RecordingConn("worker-2");
    const { core, installed, alarm } = instance(db);
    core.start([]);
    core.connect(worker, "token");
    core.message(worker, JSON.stringify({ type: "registerfunction", id: "step::run" }));
    core.message(worker, JSON.stringify({ type: "registerfunction", id: "step::hang" }));
    // One delivery stays in flight all along (another group, never answered).
    await core.enqueue({ queue: "steps", function_id: "step::hang", data: { session_id: "busy" } });
    await core.enqueue({ queue: "steps", function_id: "step::run", data: { session_id: "s", n: 1 } });
    await core.enqueue({ queue: "steps", function_id: "step::run", data: { session_id: "s", n: 2 } });
    await eventually(() => worker.calls("step::run").length === 1, 2_000, "the head's first attempt");
    const head = worker.calls("step::run")[0]!;
    const failedAt = clock.t;
    core.message(
      worker,
      JSON.stringify({
        type: "invocationresult",
        invocation_id: head.invocation_id,
        function_id: "step::run",
        error: { code: "invocation_failed", message: "retry me" },
      }),
    );
    await eventually(() => count(db, "SELECT COUNT(*) AS n FROM queue_messages WHERE attempts = 1") === 1, 2_000, "the failure recorded");
    // The second message is due but held back by its group: the next wake is the head's retry.
    expect(installed.queues.durable.nextDue()).toBe(failedAt + 200);
    expect(alarm.at).toBe(failedAt + 200);
    clock.t = failedAt + 200;
    await core.alarm();
    await eventually(() => worker.calls("step::run").length === 2, 2_000, "the head's retry");
    expect(worker.calls("step::run")[1]!.invocation_id).toBe(head.invocation_id);
  });
});

describe("enqueues arriving together share one write", () => {
  const rows = (db: DatabaseSync) => count(db, "SELECT COUNT(*) AS n FROM queue_messages WHERE queue = 'jobs'");
  /** Counts the transactions committed on `db` (nodeSql opens each with BEGIN, ends it with COMMIT). */
  function commitsOf(db: DatabaseSync): { n: number } {
    const commits = { n: 0 };
    const exec = db.exec.bind(db);
    db.exec = (q: string) => {
      if (q === "COMMIT") commits.n++;
      return exec(q);
    };
    return commits;
  }

  it("are stored in one transaction, and each is acknowledged only once its row is stored", async () => {
    const db = new DatabaseSync(":memory:");
    const { core } = instance(db);
    core.start([]);
    const commits = commitsOf(db);
    const storedWhenAcked: boolean[] = [];
    const acks = Array.from({ length: 50 }, (_, i) =>
      core.enqueue({ queue: "jobs", function_id: "x::job", data: { i } }).then((out) => {
        const id = (out.ok ? (out.result as { messageReceiptId: string }).messageReceiptId : "") as string;
        storedWhenAcked.push(count(db, `SELECT COUNT(*) AS n FROM queue_messages WHERE id = '${id}'`) === 1);
        return out;
      }),
    );
    // Taken, not yet stored, so not yet acknowledged.
    expect(rows(db)).toBe(0);
    expect(storedWhenAcked).toEqual([]);
    const outs = await Promise.all(acks);
    expect(outs.every((o) => o.ok)).toBe(true);
    expect(storedWhenAcked).toEqual(Array(50).fill(true));
    expect(rows(db)).toBe(50);
    expect(commits.n).toBe(1);
    // In the order they were enqueued.
    const order = db.prepare("SELECT data FROM queue_messages WHERE queue = 'jobs' ORDER BY seq").all() as { data: string }[];
    expect(order.map((r) => (JSON.parse(r.data) as { i: number }).i)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it("a write the database refuses refuses every enqueue in it and stores none; the next batch is stored", async () => {
    const db = new DatabaseSync(":memory:");
    const { core, warnings } = instance(db);
    core.start([]);
    db.exec("CREATE TRIGGER refuse_messages BEFORE INSERT ON queue_messages BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    const refused = await Promise.all([1, 2, 3].map((i) => core.enqueue({ queue: "jobs", function_id: "x::job", data: { i } })));
    expect(refused.map((o) => !o.ok && o.error.code)).toEqual(["enqueue_error", "enqueue_error", "enqueue_error"]);
    expect(rows(db)).toBe(0);
    expect(warnings).toContain("durable queue write failed");
    db.exec("DROP TRIGGER refuse_messages");
    const stored = await Promise.all([4, 5].map((i) => core.enqueue({ queue: "jobs", function_id: "x::job", data: { i } })));
    expect(stored.every((o) => o.ok)).toBe(true);
    expect(rows(db)).toBe(2);
  });

  it("an enqueue with an idempotency key is stored at once, its receipt with it", async () => {
    const db = new DatabaseSync(":memory:");
    const { core } = instance(db);
    core.start([]);
    const first = core.enqueue({ queue: "jobs", function_id: "x::job", data: {}, idempotency_key: "k-1" });
    // Stored before the caller's first await: a concurrent repeat of the key finds its receipt.
    expect(rows(db)).toBe(1);
    const again = core.enqueue({ queue: "jobs", function_id: "x::job", data: {}, idempotency_key: "k-1" });
    const [a, b] = await Promise.all([first, again]);
    expect(a.ok && b.ok && a.result).toEqual(b.ok && b.result);
    expect(rows(db)).toBe(1);
  });
});
