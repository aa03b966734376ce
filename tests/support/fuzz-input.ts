// Hostile input for the property tests (Node: tests/unit/parse.test.ts; workerd:
// tests/workers/fuzz.test.ts): W→E frames of every type with a right or a wrong value in every
// field, as raw JSON text so it can carry what JSON.stringify never makes (`__proto__` keys,
// duplicate keys, numbers out of range, 100 000-deep nesting), plus binary frames with invalid
// UTF-8, and HTTP requests for the front door. No runtime-specific import here.
import fc from "fast-check";
import { FRAME_TYPES, MAX_FRAME_BYTES } from "@iii-edge/protocol";

/** The seed of a run: FUZZ_SEED when set (to replay a failure), else fresh; always printed. */
export function fuzzSeed(fromEnv: string | undefined): number {
  const n = Number(fromEnv);
  return fromEnv && Number.isInteger(n) ? n : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
}

const encoder = new TextEncoder();
const quote = (s: string) => JSON.stringify(s);
/** An object's JSON text from [key, value text] pairs: keys may repeat or be `__proto__`. */
export const objectText = (entries: [string, string][]) => `{${entries.map(([k, v]) => `${quote(k)}:${v}`).join(",")}}`;

// ------------------------------------------------------------------ values (as JSON text)

const deep = (depth: number, kind: "array" | "object") =>
  kind === "array" ? "[".repeat(depth) + "]".repeat(depth) : `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
/** Built once: nesting deep enough that a recursive JSON.stringify or structured clone overflows
 * (V8 gives up near 5 000 levels) and still small (20–50 KB); 100 000 levels are for `oversized`. */
const DEEP_ARRAY = deep(10_000, "array");
const DEEP_OBJECT = deep(10_000, "object");

const protoText = fc.constantFrom(
  '{"__proto__":{"internal":true,"admin":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"__proto__":null,"prototype":1,"hasOwnProperty":"x","toString":5,"valueOf":null}',
  '{"a":1,"a":2,"__proto__":[]}',
);
const numberText = fc.oneof(
  fc.constantFrom(
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "123456789012345678901234567890",
    "9007199254740993",
    "0.1e1",
    "5e-324",
    "1.7976931348623157e308",
  ),
  fc.double().map((d) => (Number.isFinite(d) ? String(d) : "0")),
  fc.integer().map(String),
);
const nanLike = fc.constantFrom("NaN", "Infinity", "-Infinity", "undefined", "null", "1e999", "0x10", "", " ", "\u0000", "true").map(quote);
const longString = fc.oneof(
  fc.integer({ min: 1_000, max: 10_000 }).map((n) => quote("x".repeat(n))),
  fc.integer({ min: 100, max: 2_000 }).map((n) => quote("é€😀".repeat(n))),
);
const oddString = fc
  .oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "binary", maxLength: 40 }), // lone surrogates included
    fc.string({ unit: "grapheme", maxLength: 20 }),
    fc.constantFrom("\u202e", "\ud800", "\udfff", "a\u0000b", "../../etc/passwd", "%2F", "engine::x", "state::set"),
  )
  .map(quote);
export const plainJsonText = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "null");

/** Any value, as JSON text: plain JSON, prototype keys, odd numbers and strings, deep nesting. */
export const valueText: fc.Arbitrary<string> = fc.oneof(
  { weight: 80, arbitrary: plainJsonText },
  { weight: 10, arbitrary: protoText },
  { weight: 10, arbitrary: numberText },
  { weight: 10, arbitrary: nanLike },
  { weight: 10, arbitrary: oddString },
  { weight: 2, arbitrary: longString },
  { weight: 6, arbitrary: fc.integer({ min: 10, max: 1_000 }).chain((d) => fc.constantFrom(deep(d, "array"), deep(d, "object"))) },
  { weight: 1, arbitrary: fc.constantFrom(DEEP_ARRAY, DEEP_OBJECT) },
);
/** Any value nested at most a few levels (a well-formed frame's payload: deeper ones are refused
 * before any built-in sees them). */
export const shallowValueText: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: plainJsonText },
  { weight: 1, arbitrary: protoText },
  { weight: 1, arbitrary: numberText },
  { weight: 1, arbitrary: nanLike },
  { weight: 1, arbitrary: oddString },
  { weight: 1, arbitrary: longString },
);
/** A value that is never a (non-empty) string: wrong in any field that needs one. */
export const nonStringText: fc.Arbitrary<string> = fc.oneof(
  numberText,
  protoText,
  fc.constantFrom("null", "true", "false", "[]", "{}", '[""]', '""', '{"id":"x"}'),
);

// ------------------------------------------------------------------ frames

export interface FuzzPools {
  /** Ids a valid registration may use (the fuzzing connections' own). */
  registerIds: fc.Arbitrary<string>;
  /** Ids others hold, used only where ownership is checked (unregister*, registertrigger ids). */
  heldIds: string[];
  /** Functions a valid call may reach: read-only built-ins and functions that answer. */
  callable: string[];
  /** Built-ins that change something: called only with input they must refuse. */
  mutating: string[];
  /** Namespaces a valid call may name (each a Durable Object). */
  namespaces: string[];
}

export interface FuzzFrame {
  raw: string | Uint8Array;
  /** Set when the frame is a well-formed call that must get an `invocationresult`. */
  answer?: string;
}

const uuid = fc.uuid();
const traceparent = fc.constantFrom("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "garbage", "");
const triggerTypes = [
  "state",
  "http",
  "cron",
  "subscribe",
  "durable:subscriber",
  "stream",
  "stream:join",
  "engine::functions-available",
  "engine::workers-available",
  "engine::triggers-available",
  "fz-type",
  "queue",
];

/** A field: its right value most of the time, otherwise anything. */
const field = (good: fc.Arbitrary<string>) => fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: valueText });
const maybe = (name: string, v: fc.Arbitrary<string>) =>
  fc.option(
    v.map((t) => [name, t] as [string, string]),
    { nil: undefined, freq: 2 },
  );
const present = (name: string, v: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 6, arbitrary: v.map((t) => [name, t] as [string, string]) }, { weight: 1, arbitrary: fc.constant(undefined) });

function frameOf(type: fc.Arbitrary<string>, fields: fc.Arbitrary<[string, string] | undefined>[]): fc.Arbitrary<string> {
  return fc
    .tuple(
      type,
      fc.tuple(...fields),
      fc.array(fc.tuple(fc.constantFrom("__proto__", "constructor", "type", "message_type", "extra"), valueText), { maxLength: 2 }),
    )
    .map(([t, fs, extra]) => objectText([["type", t], ...(fs.filter(Boolean) as [string, string][]), ...extra]));
}

/** The frame's `type`: its own mostly, sometimes another, a near miss, or not a string at all. */
const typeOf = (own: string) =>
  fc.oneof(
    { weight: 12, arbitrary: fc.constant(quote(own)) },
    { weight: 1, arbitrary: fc.constantFrom(...FRAME_TYPES).map(quote) },
    { weight: 1, arbitrary: fc.constantFrom(own.toUpperCase(), ` ${own}`, `${own}\u0000`, "", "teleport").map(quote) },
    { weight: 1, arbitrary: nonStringText },
  );

export function workerFrames(p: FuzzPools): fc.Arbitrary<FuzzFrame> {
  const regId = field(p.registerIds.map(quote));
  const anyId = field(fc.oneof(p.registerIds, fc.constantFrom(...p.heldIds)).map(quote));
  const fnId = field(fc.oneof(p.registerIds, fc.constantFrom(...p.heldIds, ...p.callable)).map(quote));
  const ttype = field(fc.oneof(fc.constantFrom(...triggerTypes), p.registerIds).map(quote));
  const text = field(fc.string({ maxLength: 30 }).map(quote));
  const errorBody = field(
    fc.record({ code: fc.string({ maxLength: 10 }), message: fc.string({ maxLength: 20 }) }).map((e) => JSON.stringify(e)),
  );
  const config = field(
    fc.oneof(
      fc.constant('{"scope":"fz-trig"}'),
      fc.constant('{"expression":"0 0 1 1 * 2099"}'),
      fc
        .record({ api_path: fc.stringMatching(/^fz-r\/[a-z:/]{0,12}$/), http_method: fc.constantFrom("GET", "POST", "BOGUS") })
        .map((c) => JSON.stringify(c)),
      fc.record({ topic: fc.string({ maxLength: 8 }) }).map((c) => JSON.stringify(c)),
      plainJsonText,
    ),
  );
  const simple = (type: string, fields: fc.Arbitrary<[string, string] | undefined>[]) =>
    frameOf(typeOf(type), fields).map((raw): FuzzFrame => ({ raw }));

  // A call: well formed (and then it must be answered) or broken in any field.
  const call = fc
    .record({
      wellFormed: fc.boolean(),
      invocation_id: uuid,
      function_id: fc.constantFrom(...p.callable, "fz-unknown::fn", ...p.heldIds),
      data: plainJsonText,
      namespace: fc.option(fc.constantFrom(...p.namespaces), { nil: undefined }),
      timeout_ms: fc.option(fc.integer({ min: 1, max: 900_000 }), { nil: undefined }),
      traceparent: fc.option(traceparent, { nil: undefined }),
      enqueue: fc.option(fc.constantFrom("fz-no-such-queue"), { nil: undefined, freq: 8 }),
    })
    .chain((c) => {
      if (c.wellFormed) {
        const entries: [string, string][] = [
          ["type", quote("invokefunction")],
          ["invocation_id", quote(c.invocation_id)],
          ["function_id", quote(c.function_id)],
          ["data", c.data],
        ];
        if (c.namespace !== undefined) entries.push(["namespace", quote(c.namespace)]);
        if (c.timeout_ms !== undefined) entries.push(["timeout_ms", String(c.timeout_ms)]);
        if (c.traceparent !== undefined) entries.push(["traceparent", quote(c.traceparent)]);
        if (c.enqueue !== undefined) entries.push(["action", JSON.stringify({ type: "enqueue", queue: c.enqueue })]);
        return fc.constant<FuzzFrame>({ raw: objectText(entries), answer: c.invocation_id });
      }
      return frameOf(typeOf("invokefunction"), [
        maybe("invocation_id", field(uuid.map(quote))),
        present("function_id", fnId),
        maybe("data", valueText),
        maybe("metadata", valueText),
        maybe("traceparent", field(traceparent.map(quote))),
        maybe("baggage", text),
        maybe(
          "action",
          field(
            fc.constantFrom('{"type":"void"}', '{"type":"enqueue","queue":"fz-no-such-queue"}', '{"type":"later"}', '{"type":"enqueue"}'),
          ),
        ),
        maybe("timeout_ms", field(fc.integer({ min: 1, max: 900_000 }).map(String))),
        maybe("namespace", field(fc.constantFrom(...p.namespaces).map(quote))),
      ]).map((raw): FuzzFrame => ({ raw }));
    });

  // A built-in that changes something, with input it must refuse (every field it reads is wrong).
  const refusedMutation = fc
    .tuple(
      uuid,
      fc.constantFrom(...p.mutating),
      nonStringText,
      nonStringText,
      shallowValueText,
      fc.oneof(
        nonStringText.filter((t) => !t.startsWith("[")),
        fc.constant('"ops"'),
      ),
    )
    .map(
      ([id, fn, wrong1, wrong2, any, notArray]): FuzzFrame => ({
        raw: objectText([
          ["type", quote("invokefunction")],
          ["invocation_id", quote(id)],
          ["function_id", quote(fn)],
          [
            "data",
            objectText([
              ["scope", wrong1],
              ["key", any],
              ["value", any],
              ["id", wrong2],
              ["trigger_type", wrong1],
              ["function_id", wrong2],
              ["ops", notArray],
            ]),
          ],
        ]),
        answer: id,
      }),
    );

  const text_frames: fc.Arbitrary<FuzzFrame> = fc.oneof(
    {
      weight: 3,
      arbitrary: simple("registerfunction", [
        present("id", regId),
        maybe("description", text),
        maybe("request_format", valueText),
        maybe("response_format", valueText),
        maybe("metadata", field(fc.constant('{"team":"fz"}'))),
        maybe("invocation", field(fc.constant('{"url":"http://127.0.0.1/x"}'))),
      ]),
    },
    { weight: 1, arbitrary: simple("unregisterfunction", [present("id", anyId)]) },
    {
      weight: 2,
      arbitrary: simple("registertriggertype", [
        present("id", regId),
        maybe("description", text),
        maybe("trigger_request_format", valueText),
        maybe("call_request_format", valueText),
      ]),
    },
    { weight: 1, arbitrary: simple("unregistertriggertype", [present("id", anyId), maybe("description", text)]) },
    {
      weight: 3,
      arbitrary: simple("registertrigger", [
        present("id", anyId),
        present("trigger_type", ttype),
        present("function_id", fnId),
        maybe("config", config),
        maybe("metadata", valueText),
      ]),
    },
    { weight: 1, arbitrary: simple("unregistertrigger", [present("id", anyId), maybe("trigger_type", ttype)]) },
    {
      weight: 1,
      arbitrary: simple("triggerregistrationresult", [
        present("id", anyId),
        present("trigger_type", ttype),
        present("function_id", fnId),
        maybe("error", errorBody),
      ]),
    },
    { weight: 5, arbitrary: call },
    { weight: 2, arbitrary: refusedMutation },
    {
      weight: 1,
      arbitrary: simple("invocationresult", [
        present("invocation_id", field(uuid.map(quote))),
        present("function_id", fnId),
        maybe("result", valueText),
        maybe("error", errorBody),
        maybe("traceparent", text),
      ]),
    },
    {
      weight: 1,
      arbitrary: simple("reattach", [
        present("previous_worker_id", field(uuid.map(quote))),
        maybe("reattach_token", field(uuid.map(quote))),
      ]),
    },
    {
      weight: 1,
      arbitrary: simple("registerservice", [
        present("id", regId),
        maybe("name", text),
        maybe("description", text),
        maybe("parent_service_id", text),
      ]),
    },
    { weight: 1, arbitrary: simple("workerregistered", [present("worker_id", field(uuid.map(quote))), maybe("reattach_token", text)]) },
    { weight: 1, arbitrary: simple("ping", []) },
    { weight: 1, arbitrary: simple("error", [maybe("error", errorBody)]) },
    // Not a frame at all.
    {
      weight: 2,
      arbitrary: fc
        .oneof(
          valueText,
          fc.string({ maxLength: 100 }),
          fc.string({ unit: "binary", maxLength: 100 }),
          fc.constantFrom("", " ", "{", '{"type":', "[{}]", "\u0000"),
        )
        .map((raw): FuzzFrame => ({ raw })),
    },
  );

  const binary: fc.Arbitrary<FuzzFrame> = fc
    .oneof(
      fc.uint8Array({ maxLength: 200 }),
      // Telemetry prefixes are accepted and dropped (§11).
      fc.tuple(fc.constantFrom("OTLP", "MTRC", "LOGS"), fc.uint8Array({ maxLength: 50 })).map(([h, b]) => {
        const out = new Uint8Array(4 + b.length);
        out.set(encoder.encode(h));
        out.set(b, 4);
        return out;
      }),
      // A frame's UTF-8 with invalid sequences spliced in.
      fc
        .tuple(text_frames, fc.constantFrom([0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82]), fc.nat())
        .map(([f, bad, at]) => {
          const bytes = typeof f.raw === "string" ? encoder.encode(f.raw) : f.raw;
          const i = bytes.length ? at % bytes.length : 0;
          const out = new Uint8Array(bytes.length + bad.length);
          out.set(bytes.subarray(0, i));
          out.set(bad, i);
          out.set(bytes.subarray(i), i + bad.length);
          return out;
        }),
      // A well-formed frame as a binary frame: parsed like text (§2.3).
      text_frames.filter((f) => typeof f.raw === "string" && f.raw.length < 4_000).map((f) => encoder.encode(f.raw as string)),
    )
    .map((raw): FuzzFrame => ({ raw }));

  return fc.oneof({ weight: 850, arbitrary: text_frames }, { weight: 150, arbitrary: binary }, { weight: 1, arbitrary: oversized });
}

/** Over the frame limit or over a registration limit (metadata, formats, config, description),
 * or nested 100 000 deep: built once, on first use (they are large). */
let oversizedFrames: string[] | undefined;
export const oversizedList = (): string[] =>
  (oversizedFrames ??= [
    objectText([
      ["type", quote("registerfunction")],
      ["id", quote("fz-big")],
      ["description", quote("x".repeat(MAX_FRAME_BYTES + 10))],
    ]),
    objectText([
      ["type", quote("registerfunction")],
      ["id", quote("fz-big")],
      ["metadata", objectText([["pad", quote("m".repeat(20_000))]])],
    ]),
    objectText([
      ["type", quote("registerfunction")],
      ["id", quote("fz-big")],
      ["request_format", objectText([["pad", quote("s".repeat(70_000))]])],
    ]),
    objectText([
      ["type", quote("registerfunction")],
      ["id", quote("fz-big")],
      ["description", quote("d".repeat(20_000))],
    ]),
    objectText([
      ["type", quote("registertriggertype")],
      ["id", quote("fz-big")],
      ["call_request_format", objectText([["pad", quote("s".repeat(70_000))]])],
    ]),
    objectText([
      ["type", quote("registertrigger")],
      ["id", quote("fz-big")],
      ["trigger_type", quote("state")],
      ["function_id", quote("fz-big")],
      ["config", objectText([["scope", quote("c".repeat(20_000))]])],
    ]),
    objectText([
      ["type", quote("registerfunction")],
      ["id", quote("fz-big")],
      ["metadata", objectText([["deep", deep(100_000, "object")]])],
    ]),
    objectText([
      ["type", quote("invokefunction")],
      ["invocation_id", quote("fz-deep")],
      ["function_id", quote("state::get")],
      ["data", deep(100_000, "object")],
    ]),
  ]);
const oversized: fc.Arbitrary<FuzzFrame> = fc.nat().map((i) => {
  const all = oversizedList();
  return { raw: all[i % all.length]! };
});

// ------------------------------------------------------------------ the frames of a routed call

/** A string of about `n` characters: `n` ASCII ones, `n` astral ones (2 UTF-16 units each), `n`
 * units of astral ones, or with lone surrogates, so a bound that counts code points (zod's) and one
 * that counts units or bytes part at its edge. */
const sizedText = (n: number) =>
  fc.constantFrom("ascii", "astral", "units", "lone").map((kind) => {
    if (kind === "ascii" || n < 1) return quote("x".repeat(n));
    if (kind === "astral") return quote("😀".repeat(n));
    if (kind === "units") return quote("😀".repeat(n >> 1) + "x".repeat(n & 1));
    return quote(`\ud83d${"😀".repeat(n - 1)}`);
  });
/** A bounded string field: inside its bounds, exactly at them, one past them, or unicode-heavy. */
const boundedText = (min: number, max: number) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.string({ minLength: Math.max(min, 1), maxLength: Math.min(max, 40) }).map(quote) },
    { weight: 2, arbitrary: fc.constantFrom(min, max, Math.max(min, 1) + 1, max - 1).chain(sizedText) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(min - 1, max + 1, max + 2)
        .filter((n) => n >= 0)
        .chain(sizedText),
    },
    { weight: 1, arbitrary: oddString },
  );
/** One field: mostly a right value, sometimes a near miss or a wrong type. */
const callField = (good: fc.Arbitrary<string>, near: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 16, arbitrary: good }, { weight: 1, arbitrary: near }, { weight: 1, arbitrary: nonStringText });
const timeoutText = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 900_000 }).map(String) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "1",
      "900000",
      "900001",
      "0",
      "-0",
      "-1",
      "1.5",
      "1.0",
      "9e5",
      "9.000001e5",
      "1e400",
      "-1e400",
      "9007199254740993",
      '"5"',
      '"1e3"',
      "null",
      "true",
      "[5]",
    ),
  },
);
const namespaceText = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/).map(quote) },
  {
    weight: 3,
    arbitrary: fc
      .constantFrom("default", "a".repeat(64), "a".repeat(65), "", "bad ns", "ns/x", "é", "abc\n", "\nabc", "..", "a\u0000")
      .map(quote),
  },
);
const actionText = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('{"type":"void"}', '{"type":"void","queue":5,"extra":[1]}') },
  {
    weight: 4,
    arbitrary: fc
      .tuple(boundedText(1, 256), fc.option(boundedText(1, 256), { nil: undefined }), fc.option(valueText, { nil: undefined }))
      .map(([queue, key, extra]) => {
        const entries: [string, string][] = [
          ["type", quote("enqueue")],
          ["queue", queue],
        ];
        if (key !== undefined) entries.push(["idempotency_key", key]);
        if (extra !== undefined) entries.push(["message_type", extra]);
        return objectText(entries);
      }),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '{"type":"enqueue"}',
      '{"type":"enqueue","queue":""}',
      '{"type":"enqueue","queue":"q","idempotency_key":null}',
      '{"type":"enqueue","queue":"q","idempotency_key":""}',
      '{"type":"later"}',
      '{"type":null}',
      '{"type":"VOID"}',
      "{}",
      '"void"',
      "null",
      '[{"type":"void"}]',
      '{"__proto__":{"type":"void"}}',
      '{"type":"void","type":"enqueue"}',
    ),
  },
);
const errorText = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record(
        { code: fc.string({ maxLength: 12 }), message: fc.string({ maxLength: 30 }), stacktrace: fc.string({ maxLength: 30 }) },
        { requiredKeys: ["code", "message"] },
      )
      .map((e) => JSON.stringify(e)),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '{"code":"x"}',
      '{"message":"x"}',
      '{"code":1,"message":"x"}',
      '{"code":"x","message":null}',
      '{"code":"x","message":"m","stacktrace":7}',
      '{"code":"x","message":"m","stacktrace":null}',
      '{"code":"x","message":"m","cause":{"code":"y"},"__proto__":{"admin":true}}',
      "null",
      '"failed"',
      "[]",
      "{}",
    ),
  },
);
const traceText = fc.oneof(
  { weight: 4, arbitrary: traceparent.map(quote) },
  { weight: 2, arbitrary: fc.string({ maxLength: 60 }).map(quote) },
  { weight: 1, arbitrary: oddString },
);
/** An unknown key, a prototype name, a repeat of a known key (JSON.parse keeps the last). */
const extraKey = fc.tuple(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "toString",
    "hasOwnProperty",
    "message_type",
    "extra",
    "type",
    "data",
    "invocation_id",
    "error",
  ),
  fc.oneof(valueText, fc.constantFrom('"invokefunction"', '"invocationresult"', '"ping"')),
);
const optionalField = (name: string, v: fc.Arbitrary<string>) =>
  fc.option(
    v.map((t) => [name, t] as [string, string]),
    { nil: undefined, freq: 2 },
  );
const requiredField = (name: string, v: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 20, arbitrary: v.map((t) => [name, t] as [string, string]) }, { weight: 1, arbitrary: fc.constant(undefined) });
const callType = (own: string) =>
  fc.oneof(
    { weight: 30, arbitrary: fc.constant(quote(own)) },
    { weight: 1, arbitrary: fc.constantFrom(own.toUpperCase(), `${own} `, "invokefunction", "invocationresult", "").map(quote) },
  );

/**
 * `invokefunction` and `invocationresult` frames as JSON text, each field right (about half the
 * frames are valid), at or just past its bounds, of the wrong type, absent, repeated, or joined by
 * unknown and prototype keys: what the hand-written parser of these two frames (protocol's
 * call-frames.ts) must judge exactly as their zod schemas do.
 */
export function callFrames(): fc.Arbitrary<string> {
  const fields = (type: fc.Arbitrary<string>, list: fc.Arbitrary<[string, string] | undefined>[]) =>
    fc
      .tuple(type, fc.shuffledSubarray(list, { minLength: list.length }), fc.array(extraKey, { maxLength: 2 }))
      .chain(([t, fs, extra]) => fc.tuple(fc.constant(t), fc.tuple(...fs), fc.constant(extra)))
      .map(([t, fs, extra]) => objectText([["type", t], ...(fs.filter(Boolean) as [string, string][]), ...extra]));
  const invoke = fields(callType("invokefunction"), [
    optionalField("invocation_id", callField(uuid.map(quote), boundedText(1, 128))),
    requiredField("function_id", callField(fc.stringMatching(/^[a-z][a-z0-9:_-]{0,40}$/).map(quote), boundedText(1, 512))),
    optionalField("data", valueText),
    optionalField("metadata", valueText),
    optionalField("traceparent", callField(traceText, oddString)),
    optionalField("baggage", callField(fc.string({ maxLength: 40 }).map(quote), oddString)),
    optionalField("action", callField(actionText, valueText)),
    optionalField("timeout_ms", callField(timeoutText, numberText)),
    optionalField("namespace", callField(namespaceText, oddString)),
  ]);
  const result = fields(callType("invocationresult"), [
    requiredField("invocation_id", callField(uuid.map(quote), boundedText(1, 128))),
    requiredField("function_id", callField(fc.string({ maxLength: 40 }).map(quote), oddString)),
    optionalField("result", valueText),
    optionalField("error", callField(errorText, valueText)),
    optionalField("traceparent", callField(traceText, oddString)),
    optionalField("baggage", callField(fc.string({ maxLength: 40 }).map(quote), oddString)),
  ]);
  return fc.oneof({ weight: 3, arbitrary: invoke }, { weight: 2, arbitrary: result });
}

// ------------------------------------------------------------------ HTTP requests

export interface FuzzRequest {
  method: string;
  path: string;
  headers: [string, string][];
  body?: string | Uint8Array;
}

const segment = fc.oneof(
  fc.stringMatching(/^[a-z0-9._~-]{1,12}$/),
  fc.string({ maxLength: 12 }).map((s) => encodeURIComponent(s)),
  fc.constantFrom(
    "..",
    ".",
    "%2F",
    "%2e%2e",
    "%00",
    "%ZZ",
    "%",
    "a%20b",
    "é",
    "_iii",
    "ns",
    "http",
    "otel",
    "ws",
    "channels",
    "index.html",
    "x.js",
    ":id",
    "*",
  ),
);
const pathOf = (segments: string[]) => `/${segments.join("/")}`;

export interface HttpPools {
  /** Paths an http trigger answers (without the leading slash), e.g. `fz-http/echo`. */
  routes: string[];
  /** Function ids /_iii/invoke may call (read-only built-ins, functions that answer). */
  callable: string[];
  mutating: string[];
  namespaces: string[];
}

export function httpRequests(p: HttpPools): fc.Arbitrary<FuzzRequest> {
  const ns = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...p.namespaces) },
    { weight: 1, arbitrary: fc.constantFrom("bad ns", "%2F", "a".repeat(65), "ns!", "..") },
  );
  const path = fc.oneof(
    { weight: 6, arbitrary: fc.constant("/_iii/invoke") },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "/",
        "/healthz",
        "/otel",
        "/_iii",
        "/_iii/",
        "/_iii/streams",
        "/_iii/bench/plain",
        "/index.html",
        "/favicon.ico",
        "/sdk/x.js",
        "/assets/a.css",
        "//",
        "/ws/channels/x",
      ),
    },
    { weight: 2, arbitrary: fc.array(segment, { maxLength: 4 }).map((s) => pathOf(["_iii", ...s])) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(ns, fc.constantFrom("", "otel", "http", "_iii/streams", "ws/channels/x", "_iii/invoke"), fc.array(segment, { maxLength: 3 }))
        .map(([n, kind, s]) => pathOf(["ns", encodeURIComponent(n), ...(kind ? kind.split("/") : []), ...s])),
    },
    {
      weight: 4,
      arbitrary: fc.tuple(fc.constantFrom(...p.routes), fc.array(segment, { maxLength: 2 })).map(([r, s]) => pathOf([r, ...s])),
    },
    { weight: 2, arbitrary: fc.array(segment, { minLength: 1, maxLength: 5 }).map(pathOf) },
  );
  const query = fc.option(
    fc
      .array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 10 })), { maxLength: 3 })
      .map((q) => `?${q.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&")}`),
    { nil: "" },
  );
  const contentType = fc.constantFrom(
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "text/html",
    "application/octet-stream",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "application/json; charset=latin1",
    "garbage/x;;",
    "",
    "*/*",
  );
  const header = fc.oneof(
    contentType.map((v) => ["content-type", v] as [string, string]),
    fc.tuple(
      fc.constantFrom(
        "accept",
        "x-fz",
        "authorization",
        "cookie",
        "x-forwarded-for",
        "cf-connecting-ip",
        "origin",
        "x-iii-namespace",
        "traceparent",
        "baggage",
      ),
      fc.string({ maxLength: 40 }),
    ),
  );
  const invokeBody = fc
    .record({
      function_id: fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...p.callable, "fz-unknown::fn").map(quote) },
        { weight: 1, arbitrary: valueText },
      ),
      payload: valueText,
      namespace: fc.option(fc.oneof(fc.constantFrom(...p.namespaces).map(quote), valueText), { nil: undefined }),
      action: fc.option(
        fc.oneof(
          fc.constantFrom(
            '{"type":"void"}',
            '{"type":"enqueue","queue":"fz-no-such-queue"}',
            '{"type":"enqueue","queue":5}',
            '{"type":"later"}',
          ),
          valueText,
        ),
        { nil: undefined },
      ),
      timeout_ms: fc.option(
        fc.oneof(
          fc.constantFrom("1", "-5", "0", "1e308", "1.5", '"soon"', "null", "900001"),
          fc.integer({ min: 1, max: 2_000 }).map(String),
        ),
        { nil: undefined },
      ),
    })
    .map((b) => objectText(Object.entries(b).filter(([, v]) => v !== undefined) as [string, string][]));
  const refusedMutation = fc.tuple(fc.constantFrom(...p.mutating), nonStringText, shallowValueText).map(([fn, wrong, any]) =>
    objectText([
      ["function_id", quote(fn)],
      [
        "payload",
        objectText([
          ["scope", wrong],
          ["key", any],
          ["value", any],
          ["id", wrong],
          ["trigger_type", wrong],
          ["ops", wrong],
        ]),
      ],
    ]),
  );
  const body = fc.oneof(
    { weight: 5, arbitrary: invokeBody },
    { weight: 1, arbitrary: refusedMutation },
    { weight: 2, arbitrary: valueText },
    { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
    { weight: 1, arbitrary: invokeBody.map((t) => new Uint8Array([0xef, 0xbb, 0xbf, ...encoder.encode(t), 0xff])) },
  );
  return fc
    .record({
      // workerd's Request takes the standard methods only (any case).
      method: fc.oneof(
        { weight: 6, arbitrary: fc.constant("POST") },
        { weight: 3, arbitrary: fc.constantFrom("GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS") },
        { weight: 1, arbitrary: fc.constantFrom("post", "delete", "Put") },
      ),
      path,
      query,
      headers: fc.array(header, { maxLength: 4 }),
      body: fc.option(body, { nil: undefined, freq: 8 }),
    })
    .map((r) => ({
      method: r.method,
      path: r.path + r.query,
      headers: r.headers,
      body: r.method === "GET" || r.method === "HEAD" ? undefined : r.body,
    }));
}
