// cron: exactly once per occurrence across repeated alarms, eviction and a slow previous run; the
// schedule lives in SQLite and is multiplexed on the object's one alarm.
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

/** Never due by itself: the tests move `next_at` to make an occurrence due. */
const FAR = "0 0 0 1 1 * 2099";

const stubOf = (ns: string) => env.ENGINE.getByName(ns);
const schedule = (ns: string) =>
  runInDurableObject(
    stubOf(ns),
    (_i, state) =>
      state.storage.sql.exec("SELECT * FROM cron_schedule").toArray() as {
        trigger_id: string;
        next_at: number | null;
        running_since: number | null;
        last_scheduled: number | null;
        skipped: number;
        runs: number;
      }[],
  );
const makeDue = (ns: string, at: number) =>
  runInDurableObject(stubOf(ns), (_i, state) => void state.storage.sql.exec("UPDATE cron_schedule SET next_at = ?", at));

describe("cron trigger", () => {
  it("accepts 6-, 7- and 5-field expressions and refuses bad ones", async () => {
    const w = await RawWorker.connect("cron-validate");
    w.fn("c::noop", () => null);
    const ok = [
      w.trigger("cron", "c::noop", { expression: "*/5 * * * * *" }),
      w.trigger("cron", "c::noop", { expression: FAR }),
      w.trigger("cron", "c::noop", { expression: "*/5 * * * *" }),
    ];
    const bad = [
      w.trigger("cron", "c::noop", { expression: "" }),
      w.trigger("cron", "c::noop", { expression: "not a cron" }),
      w.trigger("cron", "c::noop", { expression: "1 2 3" }),
      w.trigger("cron", "c::noop", {}),
    ];
    await w.settle();
    for (const id of ok) expect(w.registrationErrors(id)).toEqual([]);
    for (const id of bad) expect(w.registrationErrors(id)[0]?.code).toBe("trigger_registration_failed");
    const rows = await schedule("cron-validate");
    expect(rows.map((r) => r.trigger_id).sort()).toEqual([...ok].sort());
    await w.close();
  });

  it("fires a due occurrence exactly once with the §8.2 payload, even if the alarm runs again", async () => {
    const ns = "cron-once";
    const w = await RawWorker.connect(ns);
    const fired: { trigger: string; job_id: string; scheduled_time: string; actual_time: string }[] = [];
    w.fn("c::tick", (d) => void fired.push(d as never));
    const id = w.trigger("cron", "c::tick", { expression: FAR });
    await w.settle();
    const scheduled = Date.UTC(2026, 0, 2, 3, 4, 5);
    await makeDue(ns, scheduled);
    expect(await runDurableObjectAlarm(stubOf(ns))).toBe(true);
    await eventually(() => fired.length === 1, 5000, "first fire");
    // A second alarm (duplicate delivery, or an alarm for another client) finds nothing due.
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));
    await new Promise((r) => setTimeout(r, 100));
    expect(fired).toHaveLength(1);
    expect(fired[0]).toMatchObject({ trigger: "cron", job_id: id, scheduled_time: "2026-01-02T03:04:05+00:00" });
    expect(fired[0]?.actual_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    const [row] = await schedule(ns);
    expect(row).toMatchObject({ last_scheduled: scheduled, runs: 1, running_since: null });
    expect(row?.next_at).toBe(Date.UTC(2099, 0, 1));
    await w.close();
  });

  it("never fires an occurrence twice across eviction, including one whose run died with the instance", async () => {
    const ns = "cron-evict";
    const w = await RawWorker.connect(ns);
    const fired: string[] = [];
    w.fn("c::job", (d) => void fired.push((d as { scheduled_time: string }).scheduled_time));
    w.trigger("cron", "c::job", { expression: FAR });
    await w.settle();
    await makeDue(ns, Date.UTC(2026, 5, 1));
    await runDurableObjectAlarm(stubOf(ns));
    await eventually(() => fired.length === 1, 5000, "fire");
    await evictDurableObject(stubOf(ns), { webSockets: "hibernate" });
    // The schedule is read back from SQLite: the claimed occurrence is not due again.
    const [after] = await schedule(ns);
    expect(after).toMatchObject({ last_scheduled: Date.UTC(2026, 5, 1), runs: 1, running_since: null, next_at: Date.UTC(2099, 0, 1) });
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));

    // An instance that died mid-run leaves its claim (running_since set, next_at advanced). Made by
    // hand here because eviction waits for in-flight work to drain.
    await runInDurableObject(
      stubOf(ns),
      (_i, state) =>
        void state.storage.sql.exec(
          "UPDATE cron_schedule SET running_since = ?, last_scheduled = ?, next_at = ?",
          Date.now(),
          Date.UTC(2026, 6, 1),
          Date.UTC(2099, 0, 1),
        ),
    );
    await evictDurableObject(stubOf(ns), { webSockets: "hibernate" });
    const [woken] = await schedule(ns);
    expect(woken).toMatchObject({ running_since: null, last_scheduled: Date.UTC(2026, 6, 1), next_at: Date.UTC(2099, 0, 1) });
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));
    await new Promise((r) => setTimeout(r, 100));
    expect(fired).toEqual(["2026-06-01T00:00:00+00:00"]);
    // The worker's socket survived hibernation and the job still runs for the next occurrence.
    await makeDue(ns, Date.UTC(2026, 7, 1));
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));
    await eventually(() => fired.length === 2, 5000, "fire after wake");
    expect(fired[1]).toBe("2026-08-01T00:00:00+00:00");
    await w.close();
  });

  it("skips (and counts) an occurrence that comes due while the previous run is still going", async () => {
    const ns = "cron-overlap";
    const w = await RawWorker.connect(ns);
    const fired: string[] = [];
    let release: () => void = () => {};
    w.fn("c::long", (d) => {
      fired.push((d as { scheduled_time: string }).scheduled_time);
      return new Promise<void>((r) => (release = r));
    });
    w.trigger("cron", "c::long", { expression: FAR });
    await w.settle();
    await makeDue(ns, Date.UTC(2026, 1, 1));
    await runDurableObjectAlarm(stubOf(ns));
    await eventually(() => fired.length === 1, 5000, "first run");
    await makeDue(ns, Date.UTC(2026, 1, 2));
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));
    const [row] = await schedule(ns);
    expect(row).toMatchObject({ skipped: 1, runs: 1 });
    expect(row?.running_since).not.toBeNull();
    release();
    await eventually(async () => (await schedule(ns))[0]?.running_since === null, 5000, "run end");
    // Once the run has ended, the next occurrence fires again.
    await makeDue(ns, Date.UTC(2026, 1, 3));
    await runInDurableObject(stubOf(ns), (_i, state) => state.storage.setAlarm(Date.now() + 60_000));
    await runDurableObjectAlarm(stubOf(ns));
    await eventually(() => fired.length === 2, 5000, "third occurrence");
    expect(fired).toEqual(["2026-02-01T00:00:00+00:00", "2026-02-03T00:00:00+00:00"]);
    release();
    await w.close();
  });

  it("a real every-second schedule fires on its own, once per second", async () => {
    const ns = "cron-live";
    const w = await RawWorker.connect(ns);
    const fired: string[] = [];
    w.fn("c::sec", (d) => void fired.push((d as { scheduled_time: string }).scheduled_time));
    w.trigger("cron", "c::sec", { expression: "* * * * * *" });
    await w.settle();
    await eventually(() => fired.length >= 2, 5000, "two ticks");
    expect(new Set(fired).size).toBe(fired.length);
    await w.close();
  });
});
