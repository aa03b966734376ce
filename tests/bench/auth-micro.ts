// The per-call cost of the grant check in plain Node, away from workerd's noise: routed calls
// through the engine core (fake ports, node:sqlite in memory, as tests/unit/routed-calls.test.ts)
// with the open grant against token grants (the callers' realistic `call` list of
// tests/bench/run.mjs), plus the check on its own (`grantOf` + `mayCall`).
// Not part of `npm run bench`; usage: node --conditions=iii-edge-source tests/bench/auth-micro.ts
// (Node 22 strips the types; the condition resolves the workspace packages to their sources).
import { OPEN_GRANT, mayCall, type Grant } from "@iii-edge/protocol";
import { mintToken, verifyToken } from "@iii-edge/protocol/token";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { echoCalls, memoryPorts } from "./micro-core.ts";
import { median } from "./stats.ts";

const CALLS = Number(process.env.MICRO_CALLS ?? 20_000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 11);
const CALLER_GRANT: Grant = { sub: "bench-caller", ns: ["*"], call: ["state::get", "state::set", "orders::*", "bench::*"] };
const ANSWER_GRANT: Grant = { sub: "bench-answer", ns: ["*"], register: ["bench::"] };

/** A core with one answering worker (answers every call at once) and one caller; `auth` gives both token grants. */
function setup(auth: boolean) {
  // Time runs 100× fast, so the per-connection frame limit (10,000/s) never drops a frame here.
  const core = new EngineCore(memoryPorts({ clockRate: 100 }));
  core.start([]);
  const run = echoCalls(core, {
    answerConnect: auth ? { grant: ANSWER_GRANT } : {},
    callerConnect: auth ? { grant: CALLER_GRANT } : {},
    throwOnError: true,
  });
  return { core, run };
}

const open = setup(false);
const auth = setup(true);
await open.run(CALLS);
await auth.run(CALLS); // warm-up (JIT)
const perCall: Record<"open" | "auth", number[]> = { open: [], auth: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const [k, s] of (r % 2
    ? [
        ["auth", auth],
        ["open", open],
      ]
    : [
        ["open", open],
        ["auth", auth],
      ]) as ["open" | "auth", typeof open][])
    perCall[k].push(await s.run(CALLS));
}

// The check alone, as onInvoke does it: the grant from the catalog's Map, then mayCall.
const check = (core: EngineCore, n: number) => {
  let ok = 0;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) if (mayCall(core.grantOf("caller"), "bench::echo")) ok++;
  if (ok !== n) throw new Error("mayCall refused");
  return ((performance.now() - t0) * 1e6) / n;
};
check(auth.core, 1e6);
check(open.core, 1e6);
const checkNs = {
  open: median(Array.from({ length: ROUNDS }, () => check(open.core, 1e6))),
  auth: median(Array.from({ length: ROUNDS }, () => check(auth.core, 1e6))),
};
if (open.core.grantOf("caller") !== OPEN_GRANT) throw new Error("the open core's caller should hold OPEN_GRANT");

// What a connect with a token adds at the front door (once per connection, not per call).
const secret = "bench-secret-0123456789abcdef0123456789abcdef";
const token = await mintToken(secret, CALLER_GRANT, 3600);
for (let i = 0; i < 2000; i++) await verifyToken(secret, token);
const verifyRounds: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const t0 = performance.now();
  for (let i = 0; i < 2000; i++) if (!(await verifyToken(secret, token)).ok) throw new Error("verify failed");
  verifyRounds.push(((performance.now() - t0) * 1000) / 2000);
}
const verifyUs = median(verifyRounds);

const o = median(perCall.open),
  a = median(perCall.auth);
console.log(
  `engine core in Node ${process.version}, ${ROUNDS} rounds × ${CALLS} sequential routed calls (both frames of each call), medians:`,
);
console.log(`  open grant   ${o.toFixed(2)} µs/call   (rounds: ${perCall.open.map((x) => x.toFixed(2)).join(", ")})`);
console.log(`  token grants ${a.toFixed(2)} µs/call   (rounds: ${perCall.auth.map((x) => x.toFixed(2)).join(", ")})`);
console.log(`  difference   ${(a - o).toFixed(2)} µs/call (${(((a - o) / o) * 100).toFixed(1)} % of the core's own cost)`);
console.log(
  `grantOf + mayCall alone: open ${checkNs.open.toFixed(0)} ns, call list ${JSON.stringify(CALLER_GRANT.call)} → ${checkNs.auth.toFixed(0)} ns per call`,
);
console.log(`verifyToken (jose HS256 + grant schema), once per connect: ${verifyUs.toFixed(1)} µs`);
process.exit(0);
