// Bounded results and registrations (engine-do/README.md "Limits"), over the wire in workerd:
// state::list answers one frame at most (paging with {limit, offset}, `result_too_large` saying how
// to page), the engine::*::list built-ins and state::list_groups page with total/next_offset and
// cut a page to the byte budget, and an oversized registration is refused and changes nothing.
// One suite of cases run on both engines: in workerd through the engine Worker (limits.test.ts)
// and on the engine core served in-process (tests/unit/limits.test.ts).
import { afterAll, describe, expect, it } from "vitest";
import {
  MAX_LIST_PAGE,
  MAX_METADATA_BYTES,
  MAX_RESULT_BYTES,
  MAX_SCHEMA_BYTES,
  MAX_TRIGGER_CONFIG_BYTES,
  MAX_WORKER_INFO_BYTES,
  jsonBytes,
} from "@iii-edge/protocol";
import { Wires, type Connected, type Frame } from "./wire-core.ts";

export function limitsCases(): void {
  const wires = new Wires();
  afterAll(() => wires.closeAll());

  /** A JSON object of exactly `bytes` bytes. */
  const sized = (bytes: number) => ({ pad: "x".repeat(bytes - jsonBytes({ pad: "" })) });

  /** Send frames, then a round trip; the error frames that came back in between. */
  async function refusals(w: Connected, ...frames: Frame[]): Promise<Frame[]> {
    const from = w.frames.length;
    for (const f of frames) w.send(f);
    const rt = await w.call("state::list_groups", {});
    return w.frames.slice(from).filter((f) => f !== rt && f.type === "error");
  }

  describe("state::list", () => {
    it(`more than ${MAX_LIST_PAGE} keys: result_too_large unpaged, every value across pages in key order`, async () => {
      const w = await wires.connect();
      const n = MAX_LIST_PAGE + 1;
      for (let i = 0; i < n; i++)
        w.send({
          type: "invokefunction",
          function_id: "state::set",
          action: { type: "void" },
          data: { scope: "lim-many", key: `k${String(i).padStart(5, "0")}`, value: i },
        });
      // Frames are handled in order: this answer comes after the writes (1001 of them: slow on a busy box).
      expect((await w.call("state::list_groups", {}, {}, 30_000)).error).toBeUndefined();
      const whole = await w.call("state::list", { scope: "lim-many" });
      expect(whole.error.code).toBe("result_too_large");
      expect(whole.error.message).toMatch(/more than 1000 keys.*limit.*offset/);
      const first = (await w.ok("state::list", { scope: "lim-many", limit: MAX_LIST_PAGE })) as number[];
      const rest = (await w.ok("state::list", { scope: "lim-many", limit: MAX_LIST_PAGE, offset: MAX_LIST_PAGE })) as number[];
      expect([...first, ...rest]).toEqual(Array.from({ length: n }, (_, i) => i));
      expect(await w.ok("state::list", { scope: "lim-many", offset: n })).toEqual([]);
      // Offset alone pages too (limit defaults to the most).
      expect(await w.ok("state::list", { scope: "lim-many", offset: n - 2 })).toEqual([n - 2, n - 1]);
    });

    it(`values over ${MAX_RESULT_BYTES} bytes together: result_too_large, built from SQL sizes, and pages that fit`, async () => {
      const w = await wires.connect();
      const big = "v".repeat(400_000);
      for (const k of ["a", "b", "c"]) await w.ok("state::set", { scope: "lim-big", key: k, value: big });
      const whole = await w.call("state::list", { scope: "lim-big" });
      expect(whole.error.code).toBe("result_too_large");
      expect(whole.error.message).toContain(`the 3 values of scope 'lim-big' come to ${3 * (big.length + 2) + 4} bytes`);
      expect(whole.error.message).toMatch(/page with \{scope, limit/);
      expect(await w.ok("state::list", { scope: "lim-big", limit: 2 })).toEqual([big, big]);
      expect(await w.ok("state::list", { scope: "lim-big", limit: 2, offset: 2 })).toEqual([big]);
      const page = await w.call("state::list", { scope: "lim-big", limit: 3 });
      expect(page.error).toMatchObject({ code: "result_too_large", message: expect.stringContaining("smaller limit") });
      // Sizes are UTF-8 bytes, not characters.
      await w.ok("state::set", { scope: "lim-wide", key: "a", value: "é".repeat(300_000) });
      await w.ok("state::set", { scope: "lim-wide", key: "b", value: "é".repeat(300_000) });
      expect((await w.call("state::list", { scope: "lim-wide" })).error.code).toBe("result_too_large");
      expect(await w.ok("state::list", { scope: "lim-wide", limit: 1, offset: 1 })).toEqual(["é".repeat(300_000)]);
    });

    it("paging input is checked", async () => {
      const w = await wires.connect();
      for (const bad of [{ limit: 0 }, { limit: MAX_LIST_PAGE + 1 }, { limit: 1.5 }, { offset: -1 }, { limit: "2" }]) {
        expect((await w.call("state::list", { scope: "lim-many", ...bad })).error.code, JSON.stringify(bad)).toBe("deserialization_error");
        expect((await w.call("state::list_groups", bad)).error.code, JSON.stringify(bad)).toBe("deserialization_error");
      }
    });

    it("state::list_groups pages with total and next_offset", async () => {
      const w = await wires.connect();
      for (const s of ["lim-g1", "lim-g2", "lim-g3"]) await w.ok("state::set", { scope: s, key: "k", value: 1 });
      const all = (await w.ok("state::list_groups")) as { groups: string[]; total: number; next_offset?: number };
      expect(all.total).toBe(all.groups.length);
      expect(all.next_offset).toBeUndefined();
      const seen: string[] = [];
      for (let offset: number | undefined = 0; offset !== undefined; ) {
        const p = (await w.ok("state::list_groups", { limit: 2, offset })) as { groups: string[]; total: number; next_offset?: number };
        expect(p.groups.length).toBeLessThanOrEqual(2);
        expect(p.total).toBe(all.total);
        seen.push(...p.groups);
        offset = p.next_offset;
      }
      expect(seen).toEqual(all.groups);
      expect(seen).toEqual(expect.arrayContaining(["lim-g1", "lim-g2", "lim-g3"]));
    });
  });

  describe("engine::*::list paging", () => {
    it("engine::functions::list: limit/offset with total and next_offset; the default page is everything up to the most", async () => {
      const w = await wires.connect();
      for (let i = 0; i < 30; i++) w.send({ type: "registerfunction", id: `lim::p${String(i).padStart(2, "0")}` });
      const all = (await w.ok("engine::functions::list", { prefix: "lim::p" })) as {
        functions: Frame[];
        total: number;
        next_offset?: number;
      };
      expect(all.functions).toHaveLength(30);
      expect(all).toMatchObject({ total: 30 });
      expect(all.next_offset).toBeUndefined();
      const ids: string[] = [];
      for (let offset: number | undefined = 0; offset !== undefined; ) {
        const p = (await w.ok("engine::functions::list", { prefix: "lim::p", limit: 7, offset })) as {
          functions: Frame[];
          total: number;
          next_offset?: number;
        };
        expect(p.total).toBe(30);
        ids.push(...p.functions.map((f) => f.function_id));
        offset = p.next_offset;
      }
      expect(ids).toEqual(all.functions.map((f) => f.function_id));
      expect((await w.call("engine::functions::list", { limit: MAX_LIST_PAGE + 1 })).error.code).toBe("deserialization_error");
    });

    it(`a page is cut to ${MAX_RESULT_BYTES} bytes: large metadata makes shorter pages, never a bigger result`, async () => {
      const w = await wires.connect();
      const meta = sized(MAX_METADATA_BYTES);
      for (let i = 0; i < 80; i++) w.send({ type: "registerfunction", id: `lim::m${String(i).padStart(2, "0")}`, metadata: meta });
      await w.call("state::list_groups", {}, {}, 30_000);
      const seen: string[] = [];
      let pages = 0;
      for (let offset: number | undefined = 0; offset !== undefined; pages++) {
        const r = await w.call("engine::functions::list", { prefix: "lim::m", offset });
        expect(r.error).toBeUndefined();
        expect(jsonBytes(r.result)).toBeLessThanOrEqual(MAX_RESULT_BYTES);
        const p = r.result as { functions: Frame[]; total: number; next_offset?: number };
        expect(p.total).toBe(80);
        seen.push(...p.functions.map((f) => f.function_id));
        offset = p.next_offset;
      }
      expect(pages).toBeGreaterThan(1);
      expect(seen).toEqual(Array.from({ length: 80 }, (_, i) => `lim::m${String(i).padStart(2, "0")}`));
    });

    it("engine::registered-triggers::list, engine::triggers::list and engine::workers::list page the same way", async () => {
      const w = await wires.connect();
      w.serve("lim::t", () => 1);
      for (let i = 0; i < 3; i++)
        w.send({
          type: "registertrigger",
          id: `lim-trig-${i}`,
          trigger_type: "state",
          function_id: "lim::t",
          config: { scope: `lim-t${i}` },
        });
      for (let i = 0; i < 3; i++) w.send({ type: "registertriggertype", id: `lim::type${i}`, description: "t" });
      await wires.connect();
      const bindings = (await w.ok("engine::registered-triggers::list", { function_id: "lim::t", limit: 2 })) as Frame;
      expect(bindings).toMatchObject({ total: 3, next_offset: 2 });
      expect(bindings.registered_triggers.map((t: Frame) => t.id)).toEqual(["lim-trig-0", "lim-trig-1"]);
      const last = (await w.ok("engine::registered-triggers::list", { function_id: "lim::t", limit: 2, offset: 2 })) as Frame;
      expect(last.registered_triggers.map((t: Frame) => t.id)).toEqual(["lim-trig-2"]);
      expect(last.next_offset).toBeUndefined();
      const types = (await w.ok("engine::triggers::list", { prefix: "lim::type", limit: 1, offset: 1 })) as Frame;
      expect(types).toMatchObject({ total: 3, next_offset: 2, triggers: [expect.objectContaining({ id: "lim::type1" })] });
      const all = (await w.ok("engine::workers::list")) as Frame;
      expect(all.total).toBe(all.workers.length);
      const one = (await w.ok("engine::workers::list", { limit: 1, offset: 1 })) as Frame;
      expect(one).toMatchObject({ total: all.total, workers: [all.workers[1]] });
    });
  });

  describe("registration limits", () => {
    it("an oversized metadata, format, config or description is refused with invalid_frame naming the field, and changes nothing", async () => {
      const w = await wires.connect();
      w.serve("lim::kept", () => 1, { metadata: { v: 1 } });
      w.send({ type: "registertriggertype", id: "lim::kept-type", description: "d" });
      w.send({ type: "registertrigger", id: "lim-kept-trig", trigger_type: "state", function_id: "lim::kept", config: { scope: "lim-k" } });
      const snapshot = async () => [
        await w.ok("engine::functions::list", { include_internal: true }),
        await w.ok("engine::triggers::list", { include_internal: true }),
        await w.ok("engine::registered-triggers::list", { include_internal: true }),
      ];
      const before = await snapshot();
      const cases: [Frame, string][] = [
        [{ type: "registerfunction", id: "lim::new", metadata: sized(MAX_METADATA_BYTES + 1) }, "metadata"],
        [{ type: "registerfunction", id: "lim::kept", metadata: sized(MAX_METADATA_BYTES + 1) }, "metadata"], // a replacement too
        [{ type: "registerfunction", id: "lim::new", request_format: sized(MAX_SCHEMA_BYTES + 1) }, "request_format"],
        [{ type: "registerfunction", id: "lim::new", response_format: sized(MAX_SCHEMA_BYTES + 1) }, "response_format"],
        [{ type: "registerfunction", id: "lim::new", description: "d".repeat(16 * 1024 + 1) }, "description"],
        [
          { type: "registertriggertype", id: "lim::kept-type", trigger_request_format: sized(MAX_SCHEMA_BYTES + 1) },
          "trigger_request_format",
        ],
        [{ type: "registertriggertype", id: "lim::new-type", call_request_format: sized(MAX_SCHEMA_BYTES + 1) }, "call_request_format"],
        [
          {
            type: "registertrigger",
            id: "lim-kept-trig",
            trigger_type: "state",
            function_id: "lim::kept",
            config: { scope: "s".repeat(MAX_TRIGGER_CONFIG_BYTES) },
          },
          "config",
        ],
        [
          {
            type: "registertrigger",
            id: "lim-new-trig",
            trigger_type: "state",
            function_id: "lim::kept",
            config: null,
            metadata: sized(MAX_METADATA_BYTES + 1),
          },
          "metadata",
        ],
      ];
      for (const [frame, field] of cases) {
        const errors = await refusals(w, frame);
        expect(
          errors.map((e) => e.error.code),
          `${frame.type} ${field}`,
        ).toEqual(["invalid_frame"]);
        expect(errors[0]!.error.message).toMatch(new RegExp(`^${frame.type}: ${field}: .*over the \\d+-byte limit`));
      }
      expect(await snapshot()).toEqual(before);
      // At the limit is fine.
      expect(
        await refusals(w, {
          type: "registerfunction",
          id: "lim::at",
          metadata: sized(MAX_METADATA_BYTES),
          request_format: sized(MAX_SCHEMA_BYTES),
        }),
      ).toEqual([]);
      const info = (await w.ok("engine::functions::info", { function_id: "lim::at" })) as Frame;
      expect(jsonBytes(info.metadata)).toBe(MAX_METADATA_BYTES);
    });

    it(`engine::workers::register over ${MAX_WORKER_INFO_BYTES} bytes is refused and the worker's info stays`, async () => {
      const w = await wires.connect();
      await w.ok("engine::workers::register", { name: "lim-worker", runtime: "node" });
      const r = await w.call("engine::workers::register", { name: "lim-worker-2", metadata: sized(MAX_WORKER_INFO_BYTES) });
      expect(r.error).toMatchObject({
        code: "deserialization_error",
        message: expect.stringContaining(`over the ${MAX_WORKER_INFO_BYTES}-byte limit`),
      });
      const list = (await w.ok("engine::workers::list")) as { workers: Frame[] };
      expect(list.workers.find((x) => x.id === w.workerId)).toMatchObject({ name: "lim-worker", runtime: "node" });
    });
  });
}
