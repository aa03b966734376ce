// Discovery fan-out on the in-memory core: one registration reaching N subscribers of
// `engine::functions-available` ({delta: true}), as the engine sends it (a frame without
// invocation id per subscriber, nothing awaited) beside the same fan-out as routed fires awaited
// until every subscriber answered (what each fire was before: an open call per subscriber), in
// the same run. Each subscriber serialises its frame as a socket would and answers routed calls in
// a later event. Tracing off and on (rate-limited as wrangler.toml sets it).
// Run: node --conditions=iii-edge-source tests/bench/discovery-micro.ts (MICRO_SUBSCRIBERS, MICRO_ROUNDS)
import type { EngineFrame } from "@iii-edge/protocol";
import { EngineCore, FUNCTIONS_CHANGED_DEBOUNCE_MS } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { Conn, EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import type { TelemetryVars } from "@iii-edge/engine-do/core/telemetry/config.ts";
import { memoryPorts } from "./micro-core.ts";
import { fmt, median } from "./stats.ts";

const SUBSCRIBERS = Number(process.env.MICRO_SUBSCRIBERS ?? 1_000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 7);

function setup(vars: TelemetryVars) {
  // The debounce window is held so it closes when the bench says (the fan-out is timed alone).
  let window: (() => void) | undefined;
  const ports: EnginePorts = memoryPorts({ clockRate: 100, timerRate: 100 });
  const real = ports.timers;
  ports.timers = {
    set: (fn, ms) => (ms === FUNCTIONS_CHANGED_DEBOUNCE_MS ? ((window = fn), "window") : real.set(fn, ms)),
    clear: (h) => (h === "window" ? (window = undefined) : real.clear(h)),
  };
  const core = new EngineCore(ports, { telemetry: { vars } });
  installEngine(core, {});
  core.start([]);
  let delivered = 0;
  let onDelivered: () => void = () => {};
  const subs: Conn[] = [];
  for (let i = 0; i < SUBSCRIBERS; i++) {
    const sub: Conn = {
      workerId: `sub${i}`,
      send(f: EngineFrame) {
        JSON.stringify(f);
        if (f.type !== "invokefunction") return true;
        delivered++;
        if (delivered === SUBSCRIBERS) onDelivered();
        if (f.invocation_id) {
          const id = f.invocation_id;
          setImmediate(() => core.message(sub, `{"type":"invocationresult","invocation_id":"${id}","function_id":"${f.function_id}"}`));
        }
        return true;
      },
      close() {},
    };
    core.connect(sub, `t${i}`);
    core.message(sub, JSON.stringify({ type: "registerfunction", id: `fan::on${i}` }));
    core.message(
      sub,
      JSON.stringify({
        type: "registertrigger",
        id: `b${i}`,
        trigger_type: "engine::functions-available",
        function_id: `fan::on${i}`,
        config: { delta: true },
      }),
    );
    subs.push(sub);
  }
  const registrar: Conn = { workerId: "registrar", send: () => true, close() {} };
  core.connect(registrar, "r");
  window?.();
  let seq = 0;
  /** One registration through the engine's window: ms until every subscriber was sent its frame. */
  const sent = (): number => {
    core.message(registrar, JSON.stringify({ type: "registerfunction", id: `fan::new${seq++}` }));
    delivered = 0;
    const t0 = performance.now();
    window?.();
    const ms = performance.now() - t0;
    if (delivered !== SUBSCRIBERS) throw new Error(`${delivered} of ${SUBSCRIBERS} subscribers were sent the change`);
    return ms;
  };
  /** The same fan-out as routed fires, each awaited: ms until every subscriber answered. */
  const routed = async (): Promise<number> => {
    const bindings = core.activeBindings("engine::functions-available");
    delivered = 0;
    const done = new Promise<void>((r) => (onDelivered = r));
    const t0 = performance.now();
    const payload = { event: "functions_changed", added: [{ function_id: `fan::routed${seq++}`, worker_name: "registrar" }], removed: [] };
    await Promise.all([done, ...bindings.map((b) => core.fire(b, payload))]);
    return performance.now() - t0;
  };
  return { sent, routed };
}

console.log(`discovery fan-out micro: ${SUBSCRIBERS} subscribers ({delta: true}), ${ROUNDS} rounds, median`);
for (const [name, vars] of [
  ["tracing off", { TRACING: "off" }],
  ["tracing on", { TRACING: "on", TRACE_SAMPLE_RATIO: "1", TRACE_RATE_LIMIT: "100", TRACE_STORE: "off" }],
] as const) {
  const b = setup(vars as TelemetryVars);
  b.sent();
  await b.routed();
  const sent: number[] = [];
  const routed: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    sent.push(b.sent());
    routed.push(await b.routed());
  }
  const s = median(sent);
  const w = median(routed);
  console.log(
    `${name}: sent without waiting ${fmt(s, 2)} ms (${fmt((s * 1000) / SUBSCRIBERS, 1)} µs per subscriber) | routed fires awaited (baseline) ${fmt(w, 2)} ms (${fmt((w * 1000) / SUBSCRIBERS, 1)} µs per subscriber) | ${fmt(w / s, 1)}× faster`,
  );
}
process.exit(0);
