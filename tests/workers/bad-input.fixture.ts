// The engine a bad-input suite sends its frames to, on either runtime (the Wire opener is the
// importing file's: tests/workers/wire.ts or tests/unit/node-wire.ts): a keeper's registrations
// that must never change, an observer that sent nothing bad, and how to read the engine's whole
// answer to one frame.
import { afterAll, beforeAll, expect } from "vitest";
import { Wire, Wires, type Connected, functionIds, type Frame } from "./wire-core.ts";

export function badInputEngine() {
  const wires = new Wires();
  let keeper: Connected; // owns the baseline registrations that must never change
  let observer: Connected;
  let baseline: string[];

  beforeAll(async () => {
    keeper = await wires.connect();
    observer = await wires.connect();
    keeper.serve("bad::keep", () => "kept", { description: "baseline" });
    keeper.send({ type: "registertriggertype", id: "bad::type", description: "baseline type" });
    keeper.send({ type: "registertrigger", id: "bad-trig", trigger_type: "state", function_id: "bad::keep", config: { scope: "bad" } });
    await keeper.ok("state::list_groups");
    baseline = await functionIds(observer);
  });
  afterAll(async () => {
    await wires.closeAll();
    // One round trip after the closes: the engine has handled every frame and close the floods left
    // behind before the file's worker is torn down (work still running then made vitest report a
    // teardown error against the workerd file).
    const last = await Wire.connect();
    await last.call("engine::functions::list", {}, {}, 30_000);
    await last.close();
  }, 60_000);

  /** The engine and the baseline are intact, seen from a connection that sent nothing bad. */
  async function assertIntact(sender: Wire, opts: { ownedBy?: string } = {}) {
    expect(sender.closed).toBeNull();
    expect(await observer.ok("bad::keep")).toBe("kept");
    const fns = ((await observer.ok("engine::functions::list", { include_internal: true })) as { functions: Frame[] }).functions;
    // A fuzzing connection may register functions of its own; nothing else may change.
    expect(fns.filter((f) => f.worker_name !== opts.ownedBy).map((f) => f.function_id)).toEqual(baseline);
    const types = ((await observer.ok("engine::triggers::list")) as { triggers: Frame[] }).triggers;
    expect(types.find((t) => t.id === "bad::type")).toMatchObject({ worker_name: keeper.workerId });
    const trig = (
      (await observer.ok("engine::registered-triggers::list", { function_id: "bad::keep" })) as { registered_triggers: Frame[] }
    ).registered_triggers;
    expect(trig.map((t) => t.id)).toEqual(["bad-trig"]);
  }

  return { wires, assertIntact, observer: () => observer, baseline: () => baseline };
}

/** Send `frame`, then a sentinel call; frames are handled in order, so what came back in
 * between is the engine's whole answer to `frame`. */
export async function answerTo(w: Wire, frame: string | ArrayBuffer | Frame): Promise<Frame[]> {
  const start = w.frames.length;
  w.send(frame);
  const sentinel = await w.call("state::get", { scope: "bad", key: "sentinel" });
  return w.frames.slice(start).filter((f) => f !== sentinel);
}

export const errorCodes = (fs: Frame[]) => fs.filter((f) => f.type === "error").map((f) => f.error.code);
