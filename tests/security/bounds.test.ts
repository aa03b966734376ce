// Bounded responses and registrations against `npm start` with AUTH_SECRET, every connection with a
// token: a scope of 80 values of ~1 MB is refused as one state::list (quickly, without the engine's
// memory growing by the listing) and read page by page; oversized registrations are refused with
// nothing changing; six sockets of one token trying to register 30 600 functions are capped per
// worker and per token, each refusal a typed error.
import { readFileSync, readdirSync } from "node:fs";
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_REGISTRATIONS_PER_PRINCIPAL } from "@iii-edge/engine-do/core/bounds.ts";
import {
  ERROR_CODES,
  MAX_LIST_PAGE,
  MAX_METADATA_BYTES,
  MAX_REGISTRATIONS_PER_WORKER,
  MAX_RESULT_BYTES,
  MAX_SCHEMA_BYTES,
  MAX_TRIGGER_CONFIG_BYTES,
  jsonBytes,
} from "@iii-edge/protocol";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually, until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
const open: RawSocket[] = [];

async function connect(sub: string): Promise<RawSocket> {
  const s = await RawSocket.open(engine.wsUrl, bearer(await token(sub)));
  open.push(s);
  return s;
}

/** Resident memory of the engine's processes (wrangler, its workerd): the ones running in our state dir. */
function engineRssMiB(): number {
  let kb = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`III_STATE_DIR=${engine.stateDir}`)) continue;
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      // gone, or not ours
    }
  }
  return kb / 1024;
}

/** Send frames, then a round trip: every answer to them has arrived when this resolves. */
async function exchange(s: RawSocket, ...frames: Frame[]): Promise<Frame[]> {
  const before = new Set(s.frames);
  for (const f of frames) s.send(f);
  await s.call("state::list_groups", {});
  return s.frames.filter((f) => !before.has(f));
}

const sized = (bytes: number) => ({ pad: "x".repeat(bytes - jsonBytes({ pad: "" })) });
const ERROR_CODE_SET = new Set<string>(ERROR_CODES);

beforeAll(async () => {
  engine = await startSecureEngine();
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => {});
  await engine?.stop();
});

describe("state::list is bounded", () => {
  const VALUE = "v".repeat(1_000_000); // ~1 MB: a frame of state::set holds it with its envelope

  it("80 values of ~1 MB: state::list is result_too_large at once, three at a time do not grow the engine's memory, and pages of one value work", async () => {
    const s = await connect("bob");
    // 8 MB per socket: inside one connection's byte burst (BYTE_BURST), so no write is dropped.
    const writers = await Promise.all(Array.from({ length: 10 }, () => connect("bob")));
    await Promise.all(
      writers.map(async (w, n) => {
        for (let j = 0; j < 8; j++) {
          const i = n * 8 + j;
          await w.ok("state::set", { scope: "bounds-huge", key: `k${String(i).padStart(2, "0")}`, value: `${i}:${VALUE}` });
        }
      }),
    );
    const rss = engineRssMiB();
    expect(rss).toBeGreaterThan(0);
    const t0 = Date.now();
    const answers = await Promise.all([0, 1, 2].map(() => s.call("state::list", { scope: "bounds-huge" })));
    const ms = Date.now() - t0;
    for (const r of answers) {
      expect(r.error?.code).toBe("result_too_large");
      expect(r.error.message).toMatch(/page with \{scope, limit/);
    }
    // Sized in SQL, refused before a value is read: well under a second, no 80 MB result built.
    expect(ms).toBeLessThan(5_000);
    const grew = engineRssMiB() - rss;
    console.log(`3 × state::list of 80 × 1 MB: ${ms} ms, engine RSS ${rss.toFixed(0)} MiB → +${grew.toFixed(0)} MiB`);
    expect(grew).toBeLessThan(200); // was +750 MiB before the bound
    // One value a page fits a frame.
    for (const i of [0, 41, 79])
      expect(await s.ok("state::list", { scope: "bounds-huge", limit: 1, offset: i })).toEqual([`${i}:${VALUE}`]);
  });

  it("a paged listing returns every value exactly once, in key order, each page within the result limit", async () => {
    const s = await connect("bob");
    const value = (i: number) => ({ i, pad: "p".repeat(100_000) });
    for (let i = 0; i < 30; i += 10)
      await Promise.all(
        Array.from({ length: 10 }, (_, j) =>
          s.ok("state::set", { scope: "bounds-paged", key: `k${String(i + j).padStart(2, "0")}`, value: value(i + j) }),
        ),
      );
    expect((await s.call("state::list", { scope: "bounds-paged" })).error?.code).toBe("result_too_large");
    const got: { i: number }[] = [];
    for (let offset = 0; ; offset += 8) {
      const r = await s.call("state::list", { scope: "bounds-paged", limit: 8, offset });
      expect(r.error).toBeUndefined();
      expect(jsonBytes(r.result)).toBeLessThanOrEqual(MAX_RESULT_BYTES);
      const page = r.result as { i: number }[];
      got.push(...page);
      if (page.length < 8) break;
    }
    expect(got.map((v) => v.i)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    // More keys than one listing holds: paging is the way, and the SDK's plain call still answers.
    for (let i = 0; i <= MAX_LIST_PAGE; i++)
      s.send({
        type: "invokefunction",
        function_id: "state::set",
        action: { type: "void" },
        data: { scope: "bounds-many", key: `k${String(i).padStart(5, "0")}`, value: i },
      });
    const iii = registerWorker(engine.wsUrl, { workerName: "bounds-sdk", headers: bearer(await token("bob")) });
    try {
      const plain = await until(
        async () => {
          try {
            await iii.trigger({ function_id: "state::list", payload: { scope: "bounds-many" } });
            return undefined;
          } catch (e) {
            return (e as { code?: string }).code === "result_too_large" ? (e as Error) : undefined;
          }
        },
        "result_too_large for 1001 keys",
        20_000,
      );
      expect(plain.message).toMatch(/more than 1000 keys/);
      const pages = [
        ...((await iii.trigger({ function_id: "state::list", payload: { scope: "bounds-many", limit: MAX_LIST_PAGE } })) as number[]),
        ...((await iii.trigger({
          function_id: "state::list",
          payload: { scope: "bounds-many", limit: MAX_LIST_PAGE, offset: MAX_LIST_PAGE },
        })) as number[]),
      ];
      expect(pages).toEqual(Array.from({ length: MAX_LIST_PAGE + 1 }, (_, i) => i));
    } finally {
      await iii.shutdown();
    }
  });
});

describe("registrations are bounded in size", () => {
  it("oversized metadata, formats and config are refused with invalid_frame and the catalog is unchanged", async () => {
    const s = await connect("bob");
    s.serve("bounds::kept", () => "kept");
    const catalog = async () =>
      JSON.stringify([
        await s.ok("engine::functions::list", { include_internal: true }),
        await s.ok("engine::registered-triggers::list", { include_internal: true }),
        await s.ok("engine::triggers::list", { include_internal: true }),
      ]);
    await exchange(s);
    const before = await catalog();
    const frames: Frame[] = [
      { type: "registerfunction", id: "bounds::meta", metadata: sized(MAX_METADATA_BYTES + 1) },
      { type: "registerfunction", id: "bounds::kept", metadata: sized(MAX_METADATA_BYTES + 1) },
      { type: "registerfunction", id: "bounds::schema", request_format: sized(MAX_SCHEMA_BYTES + 1) },
      { type: "registerfunction", id: "bounds::schema", response_format: sized(MAX_SCHEMA_BYTES + 1) },
      { type: "registertriggertype", id: "bounds::type", trigger_request_format: sized(MAX_SCHEMA_BYTES + 1) },
      {
        type: "registertrigger",
        id: "bounds-trig",
        trigger_type: "state",
        function_id: "bounds::kept",
        config: { scope: "c".repeat(MAX_TRIGGER_CONFIG_BYTES) },
      },
    ];
    const back = await exchange(s, ...frames);
    const errors = back.filter((f) => f.type === "error");
    expect(errors.map((f) => f.error.code)).toEqual(frames.map(() => "invalid_frame"));
    for (const e of errors) expect(e.error.message).toMatch(/over the \d+-byte limit/);
    expect(await catalog()).toBe(before);

    // The same through iii-sdk: the registration never appears (the SDK does not report it).
    const iii = registerWorker(engine.wsUrl, { workerName: "bounds-sdk-meta", headers: bearer(await token("bob")) });
    try {
      iii.registerFunction("bounds::sdk-big", async () => 1, { metadata: sized(MAX_METADATA_BYTES + 1) });
      iii.registerFunction("bounds::sdk-ok", async () => 1);
      await until(
        async () =>
          (await s.ok<{ functions: Frame[] }>("engine::functions::list", { prefix: "bounds::sdk-" })).functions.length > 0
            ? true
            : undefined,
        "bounds::sdk-ok listed",
      );
      const listed = (await s.ok<{ functions: Frame[] }>("engine::functions::list", { prefix: "bounds::sdk-" })).functions.map(
        (f) => f.function_id,
      );
      expect(listed).toEqual(["bounds::sdk-ok"]);
    } finally {
      await iii.shutdown();
    }
  });
});

describe("registration quotas", () => {
  const SOCKETS = 6;
  const EACH = MAX_REGISTRATIONS_PER_WORKER + 100; // 6 × 5 100 = 30 600 attempts

  let sockets: RawSocket[] = [];
  const heldBy = async (s: RawSocket, prefix: string) =>
    (await s.ok<{ total: number }>("engine::functions::list", { prefix, limit: 1 })).total;

  beforeAll(async () => {
    sockets = await Promise.all(Array.from({ length: SOCKETS }, () => connect("bob")));
    // One socket's flood at a time: under `wrangler dev` floods from several sockets at once are
    // dispatched to the object far more slowly (6 × 2 000 no-op frames: ~19 s, against 0.4 s from
    // one socket), the runtime's cost and not the quota's; the caps are the same either way.
    for (const [i, s] of sockets.entries()) {
      for (let n = 0; n < EACH; n++) s.send({ type: "registerfunction", id: `quota-${i}::f${n}` });
      await s.call("state::list_groups", {}, {}, 120_000);
    }
  }, 300_000); // ~15 s on an idle 2-core box; generous for a loaded one

  it(`per worker: six sockets trying ${SOCKETS * EACH} functions hold at most ${MAX_REGISTRATIONS_PER_WORKER} each; every refusal is a typed error frame`, async () => {
    const observer = await connect("observer");
    let total = 0;
    for (const [i, s] of sockets.entries()) {
      const held = await heldBy(observer, `quota-${i}::`);
      total += held;
      expect(held, `socket ${i}`).toBeLessThanOrEqual(MAX_REGISTRATIONS_PER_WORKER);
      const refusals = s.frames.filter((f) => f.type === "error");
      // Registrations not taken are refused with a typed error frame (the engine may stop telling a
      // socket that keeps flooding refusals after the first ones, so at most one each).
      expect(refusals.length, `socket ${i}`).toBeGreaterThan(0);
      expect(refusals.length, `socket ${i}`).toBeLessThanOrEqual(EACH - held);
      for (const f of refusals) {
        expect(ERROR_CODE_SET.has(f.error.code), JSON.stringify(f.error)).toBe(true);
        expect(f.error.code).toBe("forbidden");
      }
    }
    expect(total).toBeLessThanOrEqual(SOCKETS * MAX_REGISTRATIONS_PER_WORKER);
    console.log(`${SOCKETS} sockets × ${EACH} registrations: ${total} held`);
  });

  it(`per principal: one token's six sockets together hold at most MAX_REGISTRATIONS_PER_PRINCIPAL (${MAX_REGISTRATIONS_PER_PRINCIPAL}); another token still registers`, async () => {
    const observer = await connect("observer");
    let total = 0;
    for (let i = 0; i < SOCKETS; i++) total += await heldBy(observer, `quota-${i}::`);
    expect(total).toBeLessThanOrEqual(MAX_REGISTRATIONS_PER_PRINCIPAL);
    const messages = sockets.flatMap((s) => s.frames.filter((f) => f.type === "error").map((f) => String(f.error.message)));
    expect(messages.some((m) => m.includes("'bob'"))).toBe(true);
    const carol = await connect("carol");
    carol.serve("quota-carol::f", () => 1);
    await eventually(async () => (await heldBy(observer, "quota-carol::")) === 1, 10_000, "carol's function");
  });
});
