// Every built-in function against its contract in protocol (BUILTINS, protocol/src/builtins.ts):
// the engine has exactly those built-ins, engine::functions::info publishes both formats of each as
// derived from its schemas, and what each answers parses with its output schema.
// One suite of cases run on both engines: in workerd through the engine Worker (builtin-contracts.test.ts)
// and on the engine core served in-process (tests/unit/builtin-contracts.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { BUILTINS, formatsOf, type BuiltinId } from "@iii-edge/protocol";
import { Wires, type Frame } from "./wire-core.ts";

export function builtinContractCases(): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  const ids = Object.keys(BUILTINS).sort() as BuiltinId[];

  /** One call of every built-in with an input it accepts, in an order where each finds what it needs. */
  const calls: [BuiltinId, unknown][] = [
    ["engine::workers::register", { name: "contracts", runtime: "workerd", pid: 1, metadata: { team: "x" } }],
    ["state::set", { scope: "c", key: "a", value: { n: 1 } }],
    ["state::get", { scope: "c", key: "a" }],
    [
      "state::update",
      {
        scope: "c",
        key: "a",
        ops: [
          { type: "increment", path: "n" },
          { type: "remove", path: "" },
        ],
      },
    ],
    ["state::list", { scope: "c" }],
    ["state::list_groups", { limit: 1 }],
    ["state::list_keys", { scope: "c", limit: 10 }],
    ["state::delete", { scope: "c", key: "a" }],
    ["stream::set", { stream_name: "s", group_id: "g", item_id: "i", data: 1 }],
    ["stream::set_many", { stream_name: "s", group_id: "g", items: [{ item_id: "j", data: 1 }] }],
    ["stream::get", { stream_name: "s", group_id: "g", item_id: "i" }],
    ["stream::update", { stream_name: "s", group_id: "g", item_id: "i", ops: [{ type: "set", path: "", value: 2 }] }],
    ["stream::list", { stream_name: "s", group_id: "g" }],
    ["stream::list_items", { stream_name: "s", group_id: "g", limit: 10 }],
    ["stream::list_groups", { stream_name: "s" }],
    ["stream::list_all", {}],
    ["stream::send", { stream_name: "s", group_id: "g", type: "ping" }],
    ["stream::delete", { stream_name: "s", group_id: "g", item_id: "i" }],
    ["publish", { topic: "t", data: 1 }],
    ["iii::durable::publish", { topic: "t", data: 1 }],
    ["engine::register_trigger", { id: "c-cron", trigger_type: "cron", function_id: "c::fn", config: { expression: "0 0 0 1 1 *" } }],
    ["engine::cron::jobs", {}],
    ["engine::functions::list", { include_internal: true }],
    ["engine::functions::info", { function_id: "c::fn" }],
    ["engine::functions::info", { function_ids: ["state::set", "c::missing"] }],
    ["engine::workers::list", {}],
    ["engine::triggers::list", { include_internal: true }],
    ["engine::registered-triggers::list", { include_internal: true }],
    ["engine::unregister_trigger", { id: "c-cron" }],
    ["engine::edge::refresh", {}],
    ["engine::channels::create", { buffer_size: 2 }],
    ["engine::log::info", { message: "contracts", data: { n: 1 } }],
    ["engine::log::warn", { message: "contracts" }],
    ["engine::log::error", { message: "contracts" }],
    ["engine::log::debug", { message: "contracts" }],
    ["engine::log::trace", { message: "contracts" }],
    ["engine::queue::enqueue", { queue: "jobs", function_id: "c::fn", data: {}, idempotency_key: "k" }],
    ["engine::queue::list_topics", {}],
    ["engine::queue::topic_stats", { topic: "jobs" }],
    ["engine::queue::dlq_topics", {}],
    ["engine::queue::dlq_messages", { topic: "jobs" }],
    ["iii::queue::status", { queue: "jobs" }],
    ["iii::queue::redrive", { queue: "jobs" }],
    ["engine::traces::list", { limit: 5 }],
    ["engine::traces::tree", { trace_id: "0af7651916cd43dd8448eb211c80319c" }],
    ["engine::traces::group_by", { attribute: "iii.function_id" }],
    ["engine::logs::list", { limit: 5 }],
    ["engine::metrics::list", {}],
    ["engine::traces::clear", {}],
  ];
  /** Answer only with a dead letter to act on (not_found otherwise); their results are typed by the
   * contract at compile time (engine-do/src/core/builtins/define.ts). */
  const needsDeadLetter: BuiltinId[] = ["iii::queue::redrive_message", "iii::queue::discard_message"];

  describe("built-in contracts", () => {
    it("the engine has exactly the built-ins of the catalogue, each publishing both formats from its schemas", async () => {
      const w = await wires.connect();
      const listed = (await w.ok("engine::functions::list", { include_internal: true })) as { functions: Frame[] };
      expect(listed.functions.map((f) => f.function_id).sort()).toEqual(ids);
      for (let i = 0; i < ids.length; i += 32) {
        const info = (await w.ok("engine::functions::info", { function_ids: ids.slice(i, i + 32) })) as { functions: Frame[] };
        for (const d of info.functions) {
          const { request_format, response_format } = formatsOf(BUILTINS[d.function_id as BuiltinId]);
          expect(d.request_schema, d.function_id).toEqual(request_format);
          expect(d.response_schema, d.function_id).toEqual(response_format);
          expect(d.request_schema, d.function_id).toMatchObject({ $schema: expect.any(String) });
        }
      }
    });

    it("every built-in answers what its output schema says", async () => {
      const w = await wires.connect();
      w.serve("c::fn", () => null, { description: "a worker function", request_format: { type: "object" }, metadata: { team: "x" } });
      expect(new Set([...calls.map(([id]) => id), ...needsDeadLetter])).toEqual(new Set(ids));
      for (const [id, input] of calls) {
        const r = await w.call(id, input);
        expect(r.error, id).toBeUndefined();
        const parsed = BUILTINS[id].output.safeParse(r.result);
        expect(parsed.success ? "" : `${id}: ${JSON.stringify(parsed.error.issues[0])}`).toBe("");
      }
    });

    it("inputs are parsed with the published schema: a refused one is deserialization_error", async () => {
      const w = await wires.connect();
      for (const [id, input] of [
        ["state::set", { scope: "c" }],
        ["stream::send", { stream_name: "s" }],
        ["engine::queue::dlq_messages", { limit: 0 }],
        ["engine::functions::info", {}],
      ] as const) {
        expect((await w.call(id, input)).error?.code, id).toBe("deserialization_error");
      }
    });
  });
}
