// Bad input on the engine core served in this process: each kind of bad frame, frames over
// MAX_FRAME_BYTES, and fast-check property tests over corrupted protocol frames and random input.
// Each is refused with a typed error (and an invocationresult when it carries an invocation_id),
// the connection stays open and nothing registered changes. The floods and the rate limiter, which
// depend on how the runtime delivers socket messages, are in tests/workers/bad-input.test.ts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FRAME_TYPES, MAX_FRAME_BYTES } from "@iii-edge/protocol";
import { answerTo, badInputEngine, errorCodes } from "../workers/bad-input.fixture.ts";
import { functionIds, useNodeEngine, uuid, type Frame } from "./node-wire.ts";

useNodeEngine();
const { wires, assertIntact, observer, baseline } = badInputEngine();

describe("each kind of bad frame", () => {
  const enc = (s: string) => new TextEncoder().encode(s).buffer as ArrayBuffer;
  const cases: [string, string | ArrayBuffer | Frame, string[]][] = [
    ["non-JSON text", "{not json", ["invalid_frame"]],
    ["JSON array", "[1,2]", ["invalid_frame"]],
    ["JSON number", "42", ["invalid_frame"]],
    ["JSON string", '"registerfunction"', ["invalid_frame"]],
    ["JSON null", "null", ["invalid_frame"]],
    ["object without type", "{}", ["invalid_frame"]],
    ["non-string type", { type: 5 }, ["invalid_frame"]],
    ["unknown type (ignored, §2.3)", { type: "teleport", id: "x" }, []],
    ["empty frame (ignored)", "", []],
    ["whitespace frame (ignored)", "  \n\t ", []],
    ["registerfunction without id", { type: "registerfunction" }, ["invalid_frame"]],
    ["registerfunction with a numeric id", { type: "registerfunction", id: 5 }, ["invalid_frame"]],
    ["registerfunction with an empty id", { type: "registerfunction", id: "" }, ["invalid_frame"]],
    ["registerfunction with a 600-char id", { type: "registerfunction", id: "x".repeat(600) }, ["invalid_frame"]],
    ["registerfunction with array metadata", { type: "registerfunction", id: "bad::meta", metadata: [1] }, ["invalid_frame"]],
    ["registertrigger without function_id", { type: "registertrigger", id: "t", trigger_type: "state" }, ["invalid_frame"]],
    ["registertriggertype with a numeric id", { type: "registertriggertype", id: 1, description: "d" }, ["invalid_frame"]],
    ["unregistertrigger with an object id", { type: "unregistertrigger", id: { a: 1 } }, ["invalid_frame"]],
    [
      "invocationresult with a bad error body",
      { type: "invocationresult", invocation_id: uuid(), function_id: "f", error: { code: 1 } },
      ["invalid_frame"],
    ],
    ["reattach without previous_worker_id", { type: "reattach", reattach_token: "t" }, ["invalid_frame"]],
    ["binary telemetry (accepted and dropped, §11)", enc('OTLP{"resourceSpans":[]}'), []],
    ["binary non-JSON", enc("\u0001\u0002garbage"), ["invalid_frame"]],
    ["a built-in function id", { type: "registerfunction", id: "state::set" }, ["forbidden"]],
    ["a built-in trigger type", { type: "registertriggertype", id: "state", description: "x" }, ["forbidden"]],
    ["someone else's trigger", { type: "unregistertrigger", id: "bad-trig" }, ["forbidden"]],
    ["someone else's function (ignored, ownership-checked)", { type: "unregisterfunction", id: "bad::keep" }, []],
    [
      "an HTTP-invoked function to a private address",
      { type: "registerfunction", id: "bad::http", invocation: { url: "http://127.0.0.1/x" } },
      ["url_validation_failed"],
    ],
    ["a result for an unknown invocation (dropped)", { type: "invocationresult", invocation_id: uuid(), function_id: "f", result: 1 }, []],
    ["a stray workerregistered (ignored)", { type: "workerregistered", worker_id: uuid() }, []],
    ["a JSON ping (answered by the runtime)", { type: "ping" }, []],
  ];
  for (const [name, frame, codes] of cases) {
    it(name, async () => {
      const w = await wires.connect();
      const got = await answerTo(w, frame);
      expect(errorCodes(got)).toEqual(codes);
      expect(got.filter((f) => f.type !== "error" && f.type !== "pong")).toEqual([]);
      await assertIntact(w);
    });
  }

  it("an invalid invokefunction that has an invocation_id also gets an invocationresult error", async () => {
    const w = await wires.connect();
    for (const bad of [
      { function_id: 5 },
      { function_id: "state::get", action: { type: "teleport" } },
      { function_id: "state::get", timeout_ms: "soon" },
      { function_id: "state::get", timeout_ms: -5 },
      { function_id: "state::get", traceparent: 7 },
    ]) {
      const invocation_id = uuid();
      const got = await answerTo(w, { type: "invokefunction", invocation_id, ...bad });
      expect(errorCodes(got), JSON.stringify(bad)).toEqual(["invalid_frame"]);
      const r = got.find((f) => f.type === "invocationresult");
      expect(r, JSON.stringify(bad)).toMatchObject({ invocation_id, error: { code: "invalid_frame" } });
    }
    await assertIntact(w);
  });

  it("binary frames holding JSON are parsed like text (§2.3)", async () => {
    const w = await wires.connect();
    const invocation_id = uuid();
    w.send(
      new TextEncoder().encode(JSON.stringify({ type: "invokefunction", invocation_id, function_id: "bad::keep", data: {} }))
        .buffer as ArrayBuffer,
    );
    expect(await w.next((f) => f.invocation_id === invocation_id)).toMatchObject({ result: "kept" });
  });

  it(`refuses frames over MAX_FRAME_BYTES (${MAX_FRAME_BYTES} bytes) with frame_too_large and keeps the connection`, async () => {
    const w = await wires.connect();
    // Padded in a field the engine ignores: description, metadata and formats have limits of their own.
    const pad = (n: number) => JSON.stringify({ type: "registerfunction", id: "bad::huge", pad: "x".repeat(n) });
    const overhead = pad(0).length;
    let got = await answerTo(w, pad(MAX_FRAME_BYTES - overhead + 1));
    expect(errorCodes(got)).toEqual(["frame_too_large"]);
    got = await answerTo(w, pad(4 * MAX_FRAME_BYTES));
    expect(errorCodes(got)).toEqual(["frame_too_large"]);
    // Exactly at the limit is fine.
    got = await answerTo(w, pad(MAX_FRAME_BYTES - overhead));
    expect(errorCodes(got)).toEqual([]);
    w.send({ type: "unregisterfunction", id: "bad::huge" });
    // The limit is in bytes: multi-byte text counts by its UTF-8 size.
    const wide = JSON.stringify({ type: "registerfunction", id: "bad::wide", pad: "é".repeat(MAX_FRAME_BYTES / 2 + 10) });
    got = await answerTo(w, wide);
    expect(errorCodes(got)).toEqual(["frame_too_large"]);
    w.send({ type: "unregisterfunction", id: "bad::wide" });
    await assertIntact(w);
  });
});

// ---------------------------------------------------------------- property tests

const ident = fc.stringMatching(/^[a-z][a-z0-9:_-]{0,30}$/).map((s) => `fz-${s}`);
const jsonObj = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
const nonString = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.constant({ x: 1 }));

/** A valid W→E frame of each schema, with the fields that make it valid listed. */
interface Sample {
  frame: Frame;
  required: string[];
  /** Optional fields with a type: a wrong value there must be refused too. */
  typed: Record<string, fc.Arbitrary<unknown>>;
}
const samples: fc.Arbitrary<Sample> = fc.oneof(
  fc.record({ id: ident, description: fc.string({ maxLength: 20 }), metadata: jsonObj }).map((f) => ({
    frame: { type: "registerfunction", ...f },
    required: ["id"],
    typed: {
      description: nonString,
      metadata: fc.oneof(fc.integer(), fc.string(), fc.array(fc.integer())),
      invocation: fc.oneof(fc.integer(), fc.constant({ url: 5 })),
    },
  })),
  fc.record({ id: ident }).map((f) => ({ frame: { type: "unregisterfunction", ...f }, required: ["id"], typed: {} })),
  fc
    .record({ id: ident, description: fc.string({ maxLength: 20 }) })
    .map((f) => ({ frame: { type: "registertriggertype", ...f }, required: ["id"], typed: { description: nonString } })),
  fc.record({ id: ident, trigger_type: ident, function_id: ident, config: fc.jsonValue({ maxDepth: 2 }) }).map((f) => ({
    frame: { type: "registertrigger", ...f },
    required: ["id", "trigger_type", "function_id"],
    typed: {},
  })),
  fc
    .record({ id: ident, trigger_type: ident })
    .map((f) => ({ frame: { type: "unregistertrigger", ...f }, required: ["id"], typed: { trigger_type: nonString } })),
  fc.record({ id: ident, trigger_type: ident, function_id: ident }).map((f) => ({
    frame: { type: "triggerregistrationresult", ...f, error: { code: "x", message: "y" } },
    required: ["id", "trigger_type", "function_id"],
    typed: { error: fc.oneof(fc.integer(), fc.constant({ code: 1, message: "m" }), fc.constant({ message: "m" })) },
  })),
  fc.record({ invocation_id: fc.uuid(), function_id: ident, data: fc.jsonValue({ maxDepth: 2 }) }).map((f) => ({
    frame: { type: "invokefunction", ...f },
    required: ["function_id"],
    typed: {
      invocation_id: nonString,
      traceparent: nonString,
      baggage: nonString,
      action: fc.oneof(fc.constant({ type: "later" }), fc.constant({ type: "enqueue" }), fc.integer()),
      timeout_ms: fc.oneof(fc.constant(-1), fc.constant(0), fc.constant(1.5), fc.string({ maxLength: 3 })),
    },
  })),
  fc.record({ invocation_id: fc.uuid(), function_id: ident, result: fc.jsonValue({ maxDepth: 2 }) }).map((f) => ({
    frame: { type: "invocationresult", ...f },
    required: ["invocation_id", "function_id"],
    typed: { error: fc.oneof(fc.integer(), fc.constant({ code: "c" })), traceparent: nonString },
  })),
  fc
    .record({ previous_worker_id: fc.uuid(), reattach_token: fc.uuid() })
    .map((f) => ({ frame: { type: "reattach", ...f }, required: ["previous_worker_id"], typed: { reattach_token: nonString } })),
  fc
    .record({ id: ident, name: fc.string({ maxLength: 10 }) })
    .map((f) => ({ frame: { type: "registerservice", ...f }, required: ["id"], typed: { name: nonString } })),
);

type Corruption = { kind: "drop" | "retype" | "typed" | "type"; field: string; value?: unknown };
/** A valid frame plus one corruption that the schema must refuse. */
const corrupted = samples.chain((s) => {
  const options: fc.Arbitrary<Corruption>[] = [
    fc.constantFrom(...s.required).map((field) => ({ kind: "drop" as const, field })),
    fc.tuple(fc.constantFrom(...s.required), nonString).map(([field, value]) => ({ kind: "retype" as const, field, value })),
    nonString.map((value) => ({ kind: "type" as const, field: "type", value })),
  ];
  const typed = Object.entries(s.typed);
  if (typed.length)
    options.push(fc.constantFrom(...typed).chain(([field, arb]) => arb.map((value) => ({ kind: "typed" as const, field, value }))));
  return fc.tuple(fc.constant(s), fc.oneof(...options));
});

function apply(frame: Frame, c: Corruption): Frame {
  const out = { ...frame };
  if (c.kind === "drop") delete out[c.field];
  else out[c.field] = c.value;
  return out;
}

describe("property: corrupted frames from the protocol schemas", () => {
  it("each is refused with invalid_frame (plus an invocationresult when it carries an invocation_id), nothing changes", async () => {
    const w = await wires.connect();
    await fc.assert(
      fc.asyncProperty(corrupted, async ([sample, c]) => {
        const frame = apply(sample.frame, c);
        const got = await answerTo(w, frame);
        expect(errorCodes(got)).toEqual(["invalid_frame"]);
        const withId = frame.type === "invokefunction" && typeof frame.invocation_id === "string";
        const results = got.filter((f) => f.type === "invocationresult");
        if (withId)
          expect(results).toEqual([
            expect.objectContaining({ invocation_id: frame.invocation_id, error: expect.objectContaining({ code: "invalid_frame" }) }),
          ]);
        else expect(results).toEqual([]);
        expect(w.closed).toBeNull();
      }),
      { numRuns: 150 },
    );
    await assertIntact(w);
    expect(await functionIds(observer())).toEqual(baseline());
  });
});

describe("property: random input", () => {
  const typed = fc.record({ type: fc.constantFrom(...FRAME_TYPES) }).chain((t) => jsonObj.map((rest) => ({ ...rest, ...t })));
  const anything = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "null"),
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 200 }),
    typed.map((v) => JSON.stringify(v)),
    fc.uint8Array({ maxLength: 200 }).map((b) => b.slice().buffer as ArrayBuffer),
  );

  it("random JSON, text, typed objects and bytes: the connection stays open, the engine answers the next call, the catalog is unchanged", async () => {
    const w = await wires.connect();
    await fc.assert(
      fc.asyncProperty(fc.array(anything, { minLength: 1, maxLength: 5 }), async (batch) => {
        for (const b of batch) w.send(b);
        const r = await w.call("state::get", { scope: "bad", key: "sentinel" });
        expect(r.error).toBeUndefined();
        expect(w.closed).toBeNull();
      }),
      { numRuns: 150 },
    );
    await assertIntact(w, { ownedBy: w.workerId });
  });
});
