// Bounds on what one frame may be (protocol/src/parse.ts, json-depth.ts): nesting up to
// MAX_JSON_DEPTH, a call too large to read still answerable from its ids, binary frames that are
// not UTF-8 refused.
import { describe, expect, it } from "vitest";
import { MAX_FRAME_BYTES, MAX_JSON_DEPTH, exceedsJsonDepth, parseWorkerFrame, peekCallIds } from "@iii-edge/protocol";

const nested = (depth: number, kind: "array" | "object", leaf = "1") =>
  kind === "array" ? "[".repeat(depth) + leaf + "]".repeat(depth) : '{"a":'.repeat(depth) + leaf + "}".repeat(depth);

describe("exceedsJsonDepth", () => {
  it("counts the outermost container as level 1; primitives are level 0", () => {
    expect(exceedsJsonDepth(1, 0)).toBe(false);
    expect(exceedsJsonDepth("x".repeat(10), 0)).toBe(false);
    expect(exceedsJsonDepth({}, 0)).toBe(true);
    expect(exceedsJsonDepth({}, 1)).toBe(false);
    expect(exceedsJsonDepth({ a: [1, { b: null }] }, 3)).toBe(false);
    expect(exceedsJsonDepth({ a: [1, { b: null }] }, 2)).toBe(true);
    expect(exceedsJsonDepth([[], [[]], []], 2)).toBe(true);
  });

  it(`MAX_JSON_DEPTH (${MAX_JSON_DEPTH}) levels pass, one more does not, for arrays and objects alike`, () => {
    for (const kind of ["array", "object"] as const) {
      expect(exceedsJsonDepth(JSON.parse(nested(MAX_JSON_DEPTH, kind)))).toBe(false);
      expect(exceedsJsonDepth(JSON.parse(nested(MAX_JSON_DEPTH + 1, kind)))).toBe(true);
    }
  });

  it("measures 100 000 levels without recursion, and stops on shared or cyclic structure", () => {
    expect(exceedsJsonDepth(JSON.parse(nested(100_000, "array")))).toBe(true);
    // A cycle (only a structured clone can carry one) is too deep, not an endless walk.
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(exceedsJsonDepth(cyclic)).toBe(true);
    // 2^40 paths through 40 shared levels: refused after a bounded walk, not walked.
    let dag: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) dag = { a: dag, b: dag };
    const t = Date.now();
    expect(exceedsJsonDepth(dag)).toBe(true);
    expect(Date.now() - t).toBeLessThan(2_000);
  });
});

describe("parseWorkerFrame: nesting", () => {
  const call = (data: string) => `{"type":"invokefunction","invocation_id":"inv-1","function_id":"state::set","data":${data}}`;

  it("a frame nested exactly MAX_JSON_DEPTH deep parses", () => {
    // The frame is level 1 and `data` level 2.
    expect(parseWorkerFrame(call(nested(MAX_JSON_DEPTH - 1, "object"))).ok).toBe(true);
  });

  it("one level deeper is refused with invalid_frame naming the limit, keeping the call's ids", () => {
    const r = parseWorkerFrame(call(nested(MAX_JSON_DEPTH, "object")));
    expect(r).toMatchObject({
      ok: false,
      ignore: false,
      frame_type: "invokefunction",
      invocation_id: "inv-1",
      function_id: "state::set",
      error: { code: "invalid_frame" },
    });
    if (!r.ok) expect(r.error.message).toBe(`invokefunction is nested too deeply: more than ${MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)`);
  });

  it("10 000 and 100 000 levels deep: refused, never thrown", () => {
    for (const depth of [10_000, 100_000]) {
      for (const kind of ["array", "object"] as const) {
        const r = parseWorkerFrame(call(nested(depth, kind)));
        expect(r, `${depth} ${kind}`).toMatchObject({
          ok: false,
          error: { code: "invalid_frame", message: expect.stringContaining("MAX_JSON_DEPTH") },
        });
      }
    }
    // In a registration as well (the message keeps the wording the registration limits use).
    const reg = parseWorkerFrame(`{"type":"registerfunction","id":"f","metadata":${nested(50_000, "object")}}`);
    expect(reg).toMatchObject({ ok: false, error: { code: "invalid_frame", message: expect.stringContaining("nested too deeply") } });
  });
});

describe("parseWorkerFrame: a call over MAX_FRAME_BYTES", () => {
  it("is refused with frame_too_large and still names the call, wherever its ids are", () => {
    const pad = "x".repeat(MAX_FRAME_BYTES);
    const first = `{"type":"invokefunction","invocation_id":"inv-head","function_id":"big::fn","data":{"pad":"${pad}"}}`;
    const last = `{"data":{"pad":"${pad}"},"function_id":"big::fn","invocation_id":"inv-tail","type":"invokefunction"}`;
    for (const [raw, id] of [
      [first, "inv-head"],
      [last, "inv-tail"],
    ] as const) {
      for (const frame of [raw, new TextEncoder().encode(raw).buffer as ArrayBuffer]) {
        const r = parseWorkerFrame(frame);
        expect(r).toMatchObject({
          ok: false,
          error: { code: "frame_too_large" },
          frame_type: "invokefunction",
          invocation_id: id,
          function_id: "big::fn",
        });
      }
    }
    // Not a call (or no invocation_id): no ids, nothing to answer.
    expect(parseWorkerFrame(`{"type":"registerfunction","id":"f","description":"${pad}"}`)).not.toHaveProperty("invocation_id");
    expect(parseWorkerFrame(`{"type":"invokefunction","function_id":"big::fn","data":"${pad}"}`)).not.toHaveProperty("invocation_id");
  });

  it("peekCallIds reads only the ends of the text", () => {
    expect(peekCallIds('{"type":"invokefunction","invocation_id":"a","function_id":"f"}')).toEqual({
      invocation_id: "a",
      function_id: "f",
    });
    expect(peekCallIds('{"type":"invocationresult","invocation_id":"a","function_id":"f"}')).toBeUndefined();
    // Ids buried in the middle of a large payload are not looked for.
    const middle = `{"type":"invokefunction","data":["${"x".repeat(10_000)}",{"invocation_id":"buried"},"${"x".repeat(10_000)}"]}`;
    expect(peekCallIds(middle)).toBeUndefined();
  });
});

describe("parseWorkerFrame: binary frames that are not UTF-8", () => {
  it("are refused as invalid_frame (text frames arrive already decoded by the runtime)", () => {
    const ok = new TextEncoder().encode('{"type":"pong"}');
    expect(parseWorkerFrame(ok.buffer as ArrayBuffer).ok).toBe(true);
    for (const bad of [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80]]) {
      const bytes = new Uint8Array([...new TextEncoder().encode('{"type":"pong","x":"'), ...bad, ...new TextEncoder().encode('"}')]);
      expect(parseWorkerFrame(bytes.buffer as ArrayBuffer)).toMatchObject({
        ok: false,
        error: { code: "invalid_frame", message: "frame is not valid UTF-8" },
      });
    }
  });
});
