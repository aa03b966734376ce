// The same worker module hosted inside the engine's Worker (workerd, the deployed `HARNESS`
// host) instead of a Node process: a text round and a function-call round end to end, with the
// stand-ins on Node as before.
import { afterAll, beforeAll, expect, it } from "vitest";
import { startHarness, start, stopHarness, textOf, transcript, waitState, type Harness } from "./support/harness.ts";
import { callAnswer, sessionOf, textAnswer } from "./support/stand-ins.ts";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ edge: true });
});
afterAll(async () => {
  await stopHarness(h);
});

it("runs a function-call turn to the end inside workerd", async () => {
  const sid = "edge-1";
  const model = "gpt-edge";
  h.scripts.set(model, (_r, n) =>
    n === 0 ? callAnswer(model, [{ id: "e1", fn: "test::echo", payload: { where: "edge" } }]) : textAnswer(model, "from the edge"),
  );
  expect(await start(h, sid, model)).toEqual({ session_id: sid, started: true });
  await waitState(h, sid, "stopped");
  expect(h.targets.calls.filter((c) => sessionOf(c) === sid)).toEqual([
    { fn: "test::echo", data: { where: "edge" }, metadata: { session_id: sid, function_call_id: "e1", function_id: "test::echo" } },
  ]);
  const t = await transcript(h, sid);
  expect(t.map((e) => e.message.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
  expect(textOf(t[3].message)).toBe("from the edge");
});
