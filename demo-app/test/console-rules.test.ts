// The console's pure rules (src/), checked without a browser: which functions are the
// system's, which traces are noise, and that a trace's services get colours apart.
import { describe, expect, it } from "vitest";
import { splitFunctions } from "../src/app/system.ts";
import { shortId, sessionTitle } from "../src/app/sessions.ts";
import { hueGapFor, isNoise, MIN_HUE_GAP, serviceColour, serviceColours, type TraceSummary } from "../src/screens/traces/model.ts";

const never = { model: "never" };

describe("which functions are the system's", () => {
  const all = [
    { function_id: "state::set", worker_name: "state", metadata: never },
    { function_id: "state::get", worker_name: "state" },
    { function_id: "state::delete", worker_name: "state", metadata: never },
    { function_id: "harness::spawn", worker_name: "sub-agents" },
    { function_id: "harness::children_internal", worker_name: "sub-agents", metadata: never },
    { function_id: "harness::join_internal", worker_name: "sub-agents", metadata: never },
    { function_id: "orders::get", worker_name: "shop" },
    { function_id: "orders::purge", worker_name: "shop", metadata: never },
    { function_id: "orders::list", worker_name: "shop" },
  ];
  it("a kernel mark, or a worker whose functions are mostly marked, makes a function the system's; a user worker closing one function keeps the rest", () => {
    const { user, system } = splitFunctions(all);
    expect(user.map((f) => f.function_id)).toEqual(["orders::get", "orders::list"]);
    expect(system.map((f) => f.function_id).sort()).toEqual([
      "harness::children_internal",
      "harness::join_internal",
      "harness::spawn",
      "orders::purge",
      "state::delete",
      "state::get",
      "state::set",
    ]);
  });
});

describe("trace noise", () => {
  const trace = (over: Partial<TraceSummary>): TraceSummary => ({
    trace_id: "t",
    name: "n",
    service_name: "iii-engine",
    start_ns: 0,
    end_ns: 1,
    span_count: 1,
    error_count: 0,
    open: false,
    ...over,
  });
  it("discovery (called or fired) and small reads are noise; a turn, a user's call, a failed read and a read that fans out are not", () => {
    expect(isNoise(trace({ function_id: "engine::workers::register" }))).toBe(true);
    expect(isNoise(trace({ function_id: "console-abc::on_functions", trigger_type: "engine::functions-available" }))).toBe(true);
    expect(isNoise(trace({ function_id: "session-tree::messages", span_count: 2 }))).toBe(true);
    expect(isNoise(trace({ function_id: "run::start", span_count: 140 }))).toBe(false);
    expect(isNoise(trace({ function_id: "orders::create" }))).toBe(false);
    expect(isNoise(trace({ function_id: "orders::get", error_count: 1 }))).toBe(false);
    expect(isNoise(trace({ function_id: "orders::get", span_count: 12 }))).toBe(false);
  });
});

describe("service colours", () => {
  const hue = (c: string) => Number(/^hsl\((\d+)/.exec(c)![1]);
  const all = [
    "iii-engine",
    "policy",
    "providers",
    "turn-orchestrator",
    "session-storage",
    "approval-gate",
    "shop",
    "sub-agents",
    "credentials",
    "budget",
    "mcp",
    "sandbox",
  ];
  it.each([3, 5, 8, 12])(
    "each of %i services of a trace gets a hue apart from the others (MIN_HUE_GAP while the wheel has room), the same for the same names",
    (n) => {
      const services = all.slice(0, n);
      const colours = serviceColours(services);
      const hues = services.map((s) => hue(colours.get(s)!));
      expect(hueGapFor(n)).toBe(n <= 5 ? MIN_HUE_GAP : Math.floor(180 / (n - 1)));
      for (let i = 0; i < hues.length; i++)
        for (let j = i + 1; j < hues.length; j++) {
          const d = Math.abs(hues[i]! - hues[j]!);
          // Rounded to whole degrees in the CSS colour: one degree of slack.
          expect(Math.min(d, 360 - d), `${services[i]} / ${services[j]}`).toBeGreaterThanOrEqual(hueGapFor(n) - 1);
        }
      expect(serviceColours([...services].reverse())).toEqual(colours);
      // The first service by name keeps the colour the trace list shows for it.
      const first = [...services].sort()[0]!;
      expect(colours.get(first)).toBe(serviceColour(first));
    },
  );
});

describe("session names", () => {
  it("a title, else the first text, else the last message, else a short id", () => {
    expect(sessionTitle({ display_name: "Shop", first_text: "hi" }, "s")).toBe("Shop");
    expect(sessionTitle({ first_text: "Where is order 42?", last_message_summary: "On its way" }, "s")).toBe("Where is order 42?");
    expect(sessionTitle(undefined, "77d6fdb2-1111-4222-8333-944445555666")).toBe("session 77d6fdb2");
    expect(shortId("console-mxcd2845-1vr2")).toBe("…d2845-1vr2");
  });
});
