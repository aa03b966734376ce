// A keyed worker (docs/keyed-workers.md): a counter per user. Every function is keyed by
// `user_id`, so each user's calls run one at a time on that user's own instance, against its own
// SQLite: a Durable Object when the deployed Worker hosts it (DemoKeyedWorkers + DemoCounters in
// ./functions.ts), a node:sqlite file when it runs as a Node process (`runWorkers`).
// `keyedCounter(prefix)` makes the same worker under other function ids (the conformance suite runs
// one per test file, tests/keyed/keyed.case.ts).
import { type KeyedContext, keyed, type WorkerModule } from "@iii-edge/sdk-edge/worker";

/** Longest a call waits on its `wait_for` gate. */
const GATE_WAIT_MS = 20_000;
/** How often a waiting call looks at its gate. */
const GATE_POLL_MS = 10;
/** The state scope of gates (`wait_for`). */
export const COUNTER_GATE_SCOPE = "keyed-counter-gates";

interface AddInput {
  user_id: string;
  by?: number;
  /** Open the count, then wait until the state key `wait_for` (scope COUNTER_GATE_SCOPE) is set
   * before writing it: a call held in its turn, which shows that the user's other calls wait. */
  wait_for?: string;
}

function byOf(data: { by?: unknown }): number {
  const by = data.by ?? 1;
  if (typeof by !== "number" || !Number.isSafeInteger(by)) throw new TypeError("`by` must be an integer");
  return by;
}

function countOf(ctx: KeyedContext): number {
  ctx.sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL)");
  return ctx.sql.exec<{ count: number }>("SELECT count FROM counter WHERE id = 1")[0]?.count ?? 0;
}

async function gateOpen(ctx: KeyedContext, gate: string): Promise<void> {
  const until = Date.now() + GATE_WAIT_MS;
  while (Date.now() < until) {
    const v = await ctx.trigger({ function_id: "state::get", payload: { scope: COUNTER_GATE_SCOPE, key: gate } });
    if (v !== null && v !== undefined) return;
    await new Promise((r) => setTimeout(r, GATE_POLL_MS));
  }
  throw new Error(`gate ${gate} did not open within ${GATE_WAIT_MS} ms`);
}

export function keyedCounter(prefix = "counter"): WorkerModule {
  return {
    name: prefix === "counter" ? "counter" : `counter-${prefix}`,
    register(iii) {
      iii.registerFunction(
        `${prefix}::add`,
        keyed(async (data: AddInput, ctx) => {
          const by = byOf(data);
          const before = countOf(ctx);
          if (data.wait_for !== undefined) await gateOpen(ctx, data.wait_for);
          const count = before + by;
          ctx.sql.exec("INSERT OR REPLACE INTO counter (id, count) VALUES (1, ?)", count);
          return { user_id: ctx.key, count };
        }),
        { key: "user_id", description: "Adds `by` (default 1) to the user's counter and answers the new count" },
      );
      iii.registerFunction(
        `${prefix}::get`,
        keyed((_data: { user_id: string }, ctx) => ({ user_id: ctx.key, count: countOf(ctx) })),
        {
          key: "user_id",
          description: "The user's count",
        },
      );
      iii.registerFunction(
        `${prefix}::add-later`,
        keyed((data: { user_id: string; by?: number; at?: number; alarm_id?: string }, ctx) => {
          const by = byOf(data);
          const options = data.alarm_id === undefined ? {} : { id: data.alarm_id };
          const alarm_id = ctx.setAlarm(data.at ?? Date.now(), `${prefix}::add`, { by }, options);
          return { user_id: ctx.key, alarm_id };
        }),
        { key: "user_id", description: "Adds `by` to the user's counter at `at` (epoch ms; default now), by an alarm of the instance" },
      );
    },
  };
}

export const counter = keyedCounter();
