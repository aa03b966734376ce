// The hand-written parser of a routed call's frames (protocol/src/call-frames.ts) against the zod
// schemas it stands in for, run by tests/unit/call-frames*.test.ts once with zod's compiled object
// parsers (Node) and once with its interpreter (`jitless`, what workerd runs): on every generated
// frame both accept or both refuse, and what they accept parses to the same value, key for key and
// in the same order. The frames are fuzz-input.ts's: `callFrames` (each field of `invokefunction` /
// `invocationresult` right, at its bounds, one past them, of the wrong type, absent, repeated,
// among prototype keys) and the hostile frames of every type the workerd fuzz sends. The seed is
// printed; FUZZ_SEED=<n> replays a run.
import fc from "fast-check";
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import type { engineFrame, workerFrame } from "@iii-edge/protocol";
import { callFrames, fuzzSeed, workerFrames } from "./fuzz-input.ts";

/** The protocol module as the calling suite imported it (after configuring zod, for one). */
type Protocol = typeof import("@iii-edge/protocol");

const CALL_TYPES = new Set(["invokefunction", "invocationresult"]);
/** The fields zod keeps as they came (z.unknown): passed on as the same value, never copied. */
const AS_SENT = new Set(["data", "metadata", "result"]);

type Schema = typeof workerFrame | typeof engineFrame;

/** zod's refusal as parse.ts words it (first issue, its path, its message). */
function zodMessage(type: string, schema: Schema, value: unknown): string | undefined {
  const r = schema.safeParse(value);
  if (r.success) return undefined;
  const issue = r.error.issues[0];
  const where = issue ? issue.path.map(String).join(".") : "";
  return `${type}: ${where ? `${where}: ` : ""}${issue?.message ?? "invalid"}`;
}

/** How `fast` differs from what zod made of the same value (undefined: not at all): the same keys
 * in the same order, the JSON fields the very same values (`sameValue`), or equal ones when each
 * parsed its own copy of the text. Checked without vitest's matchers, which would cost most of
 * the run, and whose equality reads a `constructor` key of a value as its class. */
function difference(fast: Record<string, unknown>, zod: Record<string, unknown>, sameValue = true): string | undefined {
  const keys = Object.keys(zod);
  if (Object.keys(fast).join() !== keys.join()) return `keys ${Object.keys(fast).join()} vs ${keys.join()}`;
  for (const k of keys) {
    if (
      AS_SENT.has(k)
        ? sameValue
          ? fast[k] !== zod[k]
          : JSON.stringify(fast[k]) !== JSON.stringify(zod[k])
        : !isDeepStrictEqual(fast[k], zod[k])
    )
      return `${k}: ${JSON.stringify(fast[k])?.slice(0, 100)} vs ${JSON.stringify(zod[k])?.slice(0, 100)}`;
  }
  return undefined;
}

/** The suite, against `p`'s schemas as zod built them (`mode` names how, for the test titles). */
export function describeCallFramesAgreement(p: Protocol, mode: string): void {
  const { MAX_JSON_DEPTH, engineFrame, jsonDepthMessage, parseCallFrame, parseEngineFrame, parseWorkerFrame, workerFrame } = p;
  describe(`the call frames' parser agrees with their zod schemas (${mode})`, () => {
    const seed = fuzzSeed(process.env.FUZZ_SEED);
    const frames = fc.oneof(
      { weight: 4, arbitrary: callFrames() },
      {
        weight: 1,
        arbitrary: workerFrames({
          registerIds: fc.stringMatching(/^[a-z][a-z0-9:_-]{0,20}$/).map((s) => `fz-${s}`),
          heldIds: ["keep::fn"],
          callable: ["state::get", "engine::functions::list"],
          mutating: ["state::set"],
          namespaces: ["default", "fz-other"],
        }).map((f) => (typeof f.raw === "string" ? f.raw : new TextDecoder().decode(f.raw))),
      },
    );

    it("property: on 10 000 frames both accept or both refuse, and accepted frames are equal", () => {
      console.log(`call-frames seed ${seed} (FUZZ_SEED=${seed} replays it)`);
      const seen = new Map<string, number>();
      const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
      fc.assert(
        fc.property(frames, (raw) => {
          let value: unknown;
          try {
            value = JSON.parse(raw);
          } catch {
            return;
          }
          if (!value || typeof value !== "object" || Array.isArray(value)) return;
          const v = value as Record<string, unknown>;
          const type = v.type;
          const fast = parseCallFrame(v);
          const where = raw.slice(0, 300);
          if (typeof type !== "string" || !CALL_TYPES.has(type)) {
            if (fast !== undefined) expect.fail(`took a ${String(type)} frame: ${where}`);
            return;
          }
          // The value level: parseCallFrame against each schema that has these frames.
          for (const schema of [workerFrame, engineFrame]) {
            const zod = schema.safeParse(v);
            if ((fast !== undefined) !== zod.success) expect.fail(`fast ${fast ? "accepts" : "refuses"}, zod does not: ${where}`);
            const diff = zod.success && fast && difference(fast as Record<string, unknown>, zod.data as Record<string, unknown>);
            if (diff) expect.fail(`${diff} in ${where}`);
            if (schema === workerFrame) count(zod.success ? `ok:${type}` : `refused:${type}.${String(zod.error.issues[0]?.path[0] ?? "")}`);
          }
          // The frame level: what the parsers answer is what zod would have them answer, refusals
          // worded by zod (a frame nested over MAX_JSON_DEPTH is refused before either looks at it).
          for (const [parse, schema] of [
            [parseWorkerFrame, workerFrame],
            [parseEngineFrame, engineFrame],
          ] as const) {
            const r = parse(raw);
            if (r.ok) {
              const diff = fast ? difference(r.frame as Record<string, unknown>, fast as Record<string, unknown>, false) : "zod refused it";
              if (diff) expect.fail(`${diff} in ${where}`);
            } else if (r.error.message !== jsonDepthMessage(type)) {
              const message = zodMessage(type, schema, v);
              if (r.error.message !== message || r.error.code !== "invalid_frame" || r.ignore || r.frame_type !== type)
                expect.fail(`refused as ${JSON.stringify(r)}, zod says ${message}: ${where}`);
            } else if (raw.length <= 2 * MAX_JSON_DEPTH) expect.fail(`too deep at ${raw.length} characters: ${where}`);
          }
        }),
        { numRuns: 10_000, seed },
      );
      // Both sides are reached for both frames, and each field of each is refused somewhere.
      console.log(Object.fromEntries([...seen].sort()));
      for (const type of CALL_TYPES) expect(seen.get(`ok:${type}`), type).toBeGreaterThan(1_000);
      for (const field of ["invocation_id", "function_id", "traceparent", "baggage", "action", "timeout_ms", "namespace"])
        expect(seen.get(`refused:invokefunction.${field}`), `invokefunction.${field}`).toBeGreaterThan(0);
      for (const field of ["invocation_id", "function_id", "error", "traceparent", "baggage"])
        expect(seen.get(`refused:invocationresult.${field}`), `invocationresult.${field}`).toBeGreaterThan(0);
    }, 120_000);

    it("each bound at its edge: at it accepted, one past it refused with zod's words", () => {
      const call = (extra: Record<string, unknown>) => ({ type: "invokefunction", function_id: "f", ...extra });
      const result = (extra: Record<string, unknown>) => ({ type: "invocationresult", invocation_id: "i", function_id: "f", ...extra });
      const cases: [Record<string, unknown>, boolean][] = [
        [call({ invocation_id: "x".repeat(128) }), true],
        [call({ invocation_id: "x".repeat(129) }), false],
        // zod counts code points: 128 astral characters are 256 UTF-16 units.
        [call({ invocation_id: "😀".repeat(128) }), true],
        [call({ invocation_id: `${"😀".repeat(128)}x` }), false],
        [call({ invocation_id: `\ud83d${"x".repeat(127)}` }), true], // a lone surrogate is one
        [call({ invocation_id: `${"😀".repeat(127)}\ud83d\ud83d` }), false],
        [call({ invocation_id: "" }), false],
        [call({ function_id: "f".repeat(512) }), true],
        [call({ function_id: "f".repeat(513) }), false],
        [call({ function_id: "" }), false],
        [call({ timeout_ms: 900_000 }), true],
        [call({ timeout_ms: 900_001 }), false],
        [call({ timeout_ms: 1 }), true],
        [call({ timeout_ms: 0 }), false],
        [call({ timeout_ms: -0 }), false],
        [call({ timeout_ms: 1.5 }), false],
        [call({ timeout_ms: "5" }), false],
        [call({ timeout_ms: null }), false],
        [call({ namespace: "a".repeat(64) }), true],
        [call({ namespace: "a".repeat(65) }), false],
        [call({ namespace: "abc\n" }), false],
        [call({ action: { type: "enqueue", queue: "q".repeat(256), idempotency_key: "k".repeat(256) } }), true],
        [call({ action: { type: "enqueue", queue: "q".repeat(257) } }), false],
        [call({ action: { type: "enqueue", queue: "q", idempotency_key: "" } }), false],
        [call({ action: { type: "void", queue: 5 } }), true],
        [call({ action: { type: "later" } }), false],
        [call({ data: null, metadata: [1] }), true],
        [result({ function_id: "" }), true],
        [result({ invocation_id: "" }), false],
        [result({ error: { code: "c", message: "m", stacktrace: "s", cause: 1 } }), true],
        [result({ error: { code: "c", message: "m", stacktrace: null } }), false],
        [result({ error: null }), false],
        [result({ result: null, traceparent: "t", baggage: "" }), true],
        [result({ baggage: 1 }), false],
      ];
      for (const [frame, ok] of cases) {
        const raw = JSON.stringify(frame);
        const zod = workerFrame.safeParse(frame);
        expect(zod.success, raw).toBe(ok);
        expect(parseCallFrame(frame) !== undefined, raw).toBe(ok);
        const r = parseWorkerFrame(raw);
        expect(r.ok, raw).toBe(ok);
        if (!r.ok) expect(r.error.message).toBe(zodMessage(frame.type as string, workerFrame, frame));
        else expect(r.frame).toStrictEqual(zod.data);
      }
    });
  });
}
