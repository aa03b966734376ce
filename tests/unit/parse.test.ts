// The frame parser shared by the engine and the SDKs (protocol/README.md §2.3): never throws, valid
// frames round-trip, refusals carry the right code and the ids needed to answer a caller.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FRAME_TYPES,
  MAX_DESCRIPTION_BYTES,
  MAX_FRAME_BYTES,
  MAX_METADATA_BYTES,
  MAX_SCHEMA_BYTES,
  MAX_TRIGGER_CONFIG_BYTES,
  jsonBytes,
  parseEngineFrame,
  parseWorkerFrame,
  utf8Length,
} from "@iii-edge/protocol";
import { fuzzSeed, oversizedList, workerFrames } from "@iii-edge/test-support/fuzz-input";

const id = fc.stringMatching(/^[a-z][a-z0-9:_-]{0,40}$/);
const json = fc.jsonValue({ maxDepth: 3 });
const validWorkerFrame = fc.oneof(
  fc.record({ type: fc.constant("registerfunction"), id, description: fc.string({ maxLength: 20 }) }, { requiredKeys: ["type", "id"] }),
  fc.record({ type: fc.constant("unregisterfunction"), id }),
  fc.record({ type: fc.constant("registertriggertype"), id, description: fc.string({ maxLength: 20 }) }),
  fc.record(
    { type: fc.constant("registertrigger"), id, trigger_type: id, function_id: id, config: json, metadata: json },
    { requiredKeys: ["type", "id", "trigger_type", "function_id"] },
  ),
  fc.record({ type: fc.constant("unregistertrigger"), id, trigger_type: id }, { requiredKeys: ["type", "id"] }),
  fc.record(
    {
      type: fc.constant("triggerregistrationresult"),
      id,
      trigger_type: id,
      function_id: id,
      error: fc.record({ code: fc.string(), message: fc.string() }),
    },
    { requiredKeys: ["type", "id", "trigger_type", "function_id"] },
  ),
  fc.record(
    {
      type: fc.constant("invokefunction"),
      invocation_id: fc.uuid(),
      function_id: id,
      data: json,
      metadata: json,
      traceparent: fc.string({ maxLength: 60 }),
      baggage: fc.string({ maxLength: 60 }),
      action: fc.oneof(fc.constant({ type: "void" }), fc.record({ type: fc.constant("enqueue"), queue: id })),
      timeout_ms: fc.integer({ min: 1, max: 900_000 }),
    },
    { requiredKeys: ["type", "function_id"] },
  ),
  fc.record(
    { type: fc.constant("invocationresult"), invocation_id: fc.uuid(), function_id: id, result: json },
    { requiredKeys: ["type", "invocation_id", "function_id"] },
  ),
  fc.record(
    { type: fc.constant("reattach"), previous_worker_id: fc.uuid(), reattach_token: fc.uuid() },
    { requiredKeys: ["type", "previous_worker_id"] },
  ),
  fc.record({ type: fc.constantFrom("ping", "pong") }),
);

describe("parseWorkerFrame", () => {
  it("property: valid frames parse and round-trip (unknown fields ignored, nothing added)", () => {
    fc.assert(
      fc.property(validWorkerFrame, (frame) => {
        const text = JSON.stringify(frame);
        const r = parseWorkerFrame(text);
        expect(r.ok).toBe(true);
        if (r.ok) expect(JSON.parse(JSON.stringify(r.frame))).toEqual(JSON.parse(text));
        // The SDK's leaked `message_type` (§12.7) and other unknown fields do not matter.
        const noisy = parseWorkerFrame(JSON.stringify({ ...frame, message_type: frame.type, extra: [1] }));
        expect(noisy.ok).toBe(true);
        // Binary frames holding the same JSON parse the same.
        const bin = parseWorkerFrame(new TextEncoder().encode(text));
        expect(bin.ok).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("property: never throws on any input; refusals are invalid_frame / frame_too_large or ignored", () => {
    const anyInput = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.string({ unit: "binary", maxLength: 300 }),
      json.map((v) => JSON.stringify(v) ?? ""),
      fc.uint8Array({ maxLength: 300 }),
      fc
        .record({ type: fc.constantFrom(...FRAME_TYPES, "bogus") })
        .chain((t) => fc.dictionary(fc.string({ maxLength: 12 }), json, { maxKeys: 6 }).map((d) => JSON.stringify({ ...d, ...t }))),
    );
    fc.assert(
      fc.property(anyInput, (input) => {
        const r = parseWorkerFrame(input);
        if (!r.ok) expect(["invalid_frame", "frame_too_large"]).toContain(r.error.code);
      }),
      { numRuns: 2_000 },
    );
  });

  it("classifies each kind of bad input", () => {
    const bad = (raw: string) => parseWorkerFrame(raw) as Extract<ReturnType<typeof parseWorkerFrame>, { ok: false }>;
    expect(bad("")).toMatchObject({ ok: false, ignore: true });
    expect(bad("   ")).toMatchObject({ ok: false, ignore: true });
    expect(bad('{"type":"nope"}')).toMatchObject({ ok: false, ignore: true });
    for (const raw of ["{x", "[]", "1", "null", '"s"', "{}", '{"type":1}'])
      expect(bad(raw), raw).toMatchObject({ ok: false, ignore: false, error: { code: "invalid_frame" } });
    const call = bad(JSON.stringify({ type: "invokefunction", invocation_id: "abc", function_id: 7 }));
    expect(call).toMatchObject({ ignore: false, error: { code: "invalid_frame" }, frame_type: "invokefunction", invocation_id: "abc" });
    expect(call.error.message).toContain("function_id");
  });

  it(`refuses frames over ${MAX_FRAME_BYTES} bytes, counting UTF-8 bytes of text`, () => {
    const pad = (n: number, ch = "x") => JSON.stringify({ type: "ping", pad: ch.repeat(n) });
    const over = pad(0).length;
    expect(parseWorkerFrame(pad(MAX_FRAME_BYTES - over)).ok).toBe(true);
    expect(parseWorkerFrame(pad(MAX_FRAME_BYTES - over + 1))).toMatchObject({ ok: false, error: { code: "frame_too_large" } });
    expect(parseWorkerFrame(pad(MAX_FRAME_BYTES / 2, "é"))).toMatchObject({ ok: false, error: { code: "frame_too_large" } });
    expect(parseWorkerFrame(new Uint8Array(MAX_FRAME_BYTES + 1))).toMatchObject({ ok: false, error: { code: "frame_too_large" } });
  });
});

describe("parseEngineFrame", () => {
  // The fixture is a capture of iii-sdk 0.22.1 workers talking to the reference engine, one frame a
  // line with its direction: whatever the real SDK and engine send, our parsers must take.
  it("accepts every frame of a real iii-sdk 0.22.1 session (fixtures/iii-sdk-0.22.1-frames.jsonl)", async () => {
    const { readFileSync } = await import("node:fs");
    const file = new URL("./fixtures/iii-sdk-0.22.1-frames.jsonl", import.meta.url);
    const lines = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { dir: string; conn: string; frame: Record<string, unknown> });
    let engine = 0;
    let worker = 0;
    for (const l of lines) {
      if (!l.conn.startsWith("worker") || typeof l.frame.type !== "string") continue;
      if (l.dir === "engine->client") {
        engine++;
        expect(parseEngineFrame(JSON.stringify(l.frame)).ok, JSON.stringify(l.frame)).toBe(true);
      } else {
        worker++;
        expect(parseWorkerFrame(JSON.stringify(l.frame)).ok, JSON.stringify(l.frame)).toBe(true);
      }
    }
    expect(engine).toBeGreaterThan(10);
    expect(worker).toBeGreaterThan(10);
  });
});

describe("hostile frames (tests/support/fuzz-input.ts)", () => {
  const seed = fuzzSeed(process.env.FUZZ_SEED);
  const frames = workerFrames({
    registerIds: fc.stringMatching(/^[a-z][a-z0-9:_-]{0,20}$/).map((s) => `fz-${s}`),
    heldIds: ["keep::fn", "keep-trigger"],
    callable: ["state::get", "engine::functions::list"],
    mutating: ["state::set", "engine::register_trigger"],
    namespaces: ["default", "fz-other"],
  });

  it("property: 10 000 hostile frames never throw; each parses within the registration limits or is refused", () => {
    console.log(`parse fuzz seed ${seed} (FUZZ_SEED=${seed} replays it)`);
    const codes = new Map<string, number>();
    fc.assert(
      fc.property(frames, ({ raw, answer }) => {
        const r = parseWorkerFrame(raw);
        const size = typeof raw === "string" ? utf8Length(raw) : raw.byteLength;
        if (size > MAX_FRAME_BYTES) expect(r).toMatchObject({ ok: false, error: { code: "frame_too_large" } });
        if (answer !== undefined && size <= MAX_FRAME_BYTES) expect(r.ok, String(raw).slice(0, 200)).toBe(true);
        if (!r.ok) {
          expect(["invalid_frame", "frame_too_large"]).toContain(r.error.code);
          codes.set(r.error.code, (codes.get(r.error.code) ?? 0) + 1);
          return;
        }
        codes.set(`ok:${r.frame.type}`, (codes.get(`ok:${r.frame.type}`) ?? 0) + 1);
        const f = r.frame as Record<string, unknown>;
        // What a registration stores is within its limits, and serialisable.
        if (f.type === "registerfunction" || f.type === "registertriggertype" || f.type === "registertrigger") {
          if (typeof f.description === "string") expect(utf8Length(f.description)).toBeLessThanOrEqual(MAX_DESCRIPTION_BYTES);
          for (const k of ["request_format", "response_format", "trigger_request_format", "call_request_format"])
            expect(jsonBytes(f[k])).toBeLessThanOrEqual(MAX_SCHEMA_BYTES);
          expect(jsonBytes(f.metadata)).toBeLessThanOrEqual(MAX_METADATA_BYTES);
          expect(jsonBytes(f.config)).toBeLessThanOrEqual(MAX_TRIGGER_CONFIG_BYTES);
        }
        // A `__proto__` key never becomes a prototype on the way in.
        if (f.metadata && typeof f.metadata === "object" && !Array.isArray(f.metadata))
          expect(Object.getPrototypeOf(f.metadata)).toBe(Object.prototype);
      }),
      { numRuns: 10_000, seed },
    );
    // The generator reaches both sides: accepted frames of most types, and each kind of refusal.
    expect(codes.get("invalid_frame")).toBeGreaterThan(1_000);
    expect([...codes.keys()].filter((k) => k.startsWith("ok:")).length).toBeGreaterThanOrEqual(8);
  }, 60_000);

  it("registration limits: at the limit accepted, one byte over refused with the field named", () => {
    const json = (bytes: number) => ({ pad: "x".repeat(bytes - jsonBytes({ pad: "" })) });
    const cases: [Record<string, unknown>, string, number][] = [
      [{ type: "registerfunction", id: "f" }, "metadata", MAX_METADATA_BYTES],
      [{ type: "registerfunction", id: "f" }, "request_format", MAX_SCHEMA_BYTES],
      [{ type: "registerfunction", id: "f" }, "response_format", MAX_SCHEMA_BYTES],
      [{ type: "registertriggertype", id: "t" }, "trigger_request_format", MAX_SCHEMA_BYTES],
      [{ type: "registertriggertype", id: "t" }, "call_request_format", MAX_SCHEMA_BYTES],
      [{ type: "registertrigger", id: "b", trigger_type: "state", function_id: "f" }, "config", MAX_TRIGGER_CONFIG_BYTES],
      [{ type: "registertrigger", id: "b", trigger_type: "state", function_id: "f" }, "metadata", MAX_METADATA_BYTES],
    ];
    for (const [frame, key, max] of cases) {
      expect(parseWorkerFrame(JSON.stringify({ ...frame, [key]: json(max) })).ok, `${frame.type}.${key} at ${max}`).toBe(true);
      const over = parseWorkerFrame(JSON.stringify({ ...frame, [key]: json(max + 1) }));
      expect(over, `${frame.type}.${key} over`).toMatchObject({ ok: false, error: { code: "invalid_frame" } });
      if (!over.ok) expect(over.error.message).toContain(`${frame.type}: ${key}: ${max + 1} bytes of JSON, over the ${max}-byte limit`);
    }
    // Descriptions count UTF-8 bytes.
    expect(
      parseWorkerFrame(JSON.stringify({ type: "registerfunction", id: "f", description: "é".repeat(MAX_DESCRIPTION_BYTES / 2) })).ok,
    ).toBe(true);
    const wide = parseWorkerFrame(
      JSON.stringify({ type: "registerfunction", id: "f", description: `${"é".repeat(MAX_DESCRIPTION_BYTES / 2)}x` }),
    );
    expect(wide).toMatchObject({ ok: false, error: { code: "invalid_frame", message: expect.stringContaining("description") } });
    // Each oversized registration of the fuzz set is refused (a call's deep `data` is the callee's business).
    for (const raw of oversizedList().filter((r) => !r.startsWith('{"type":"invokefunction"'))) {
      expect(parseWorkerFrame(raw), raw.slice(0, 80)).toMatchObject({
        ok: false,
        error: { code: expect.stringMatching(/^(invalid_frame|frame_too_large)$/) },
      });
    }
    // Nested too deeply to store: refused, not thrown.
    const deep = `${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}`;
    const r = parseWorkerFrame(`{"type":"registerfunction","id":"f","metadata":${deep}}`);
    expect(r).toMatchObject({ ok: false, error: { code: "invalid_frame", message: expect.stringContaining("nested too deeply") } });
  });
});
