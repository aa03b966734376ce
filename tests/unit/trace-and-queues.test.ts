// Pure pieces behind trace propagation and the queue configuration (engine-do/src/core/trace.ts,
// queues/config.ts): which W3C headers an incoming request is trusted with, what a fresh trace looks
// like, the queue names the engine keeps for itself, and the `turn-step` queue the harness steps
// run on, as the deployable configures it (wrangler.toml).
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_BAGGAGE_BYTES, freshTraceparent, traceFromHeaders } from "@iii-edge/engine-do/core/trace.ts";
import { parseQueueConfigs } from "@iii-edge/engine-do/core/queues/config.ts";
import { invokeHttpFunction } from "@iii-edge/engine-do/core/http-invoke.ts";
import { repoRoot } from "@iii-edge/test-support/engine-server";

const TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const headers = (h: Record<string, string>) => traceFromHeaders((name) => h[name]);

describe("traceFromHeaders", () => {
  it("takes a valid traceparent (normalised to lower case) and a bounded baggage", () => {
    expect(headers({ traceparent: TP, baggage: "a=1,b=2" })).toEqual({ traceparent: TP, baggage: "a=1,b=2" });
    expect(headers({ traceparent: ` ${TP.toUpperCase()} ` })).toEqual({ traceparent: TP });
    // A later version may add fields.
    expect(headers({ traceparent: `01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra` }).traceparent).toBeDefined();
    expect(headers({})).toEqual({});
  });

  it("ignores a malformed traceparent and an oversized baggage (W3C: ignore, do not fail)", () => {
    for (const bad of [
      "00-not-a-trace-01",
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // version ff is invalid
      "00-00000000000000000000000000000000-b7ad6b7169203331-01", // all-zero trace id
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // all-zero parent id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", // no flags
      `01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-${"x".repeat(300)}`,
    ]) {
      expect(headers({ traceparent: bad }), bad).toEqual({});
    }
    expect(headers({ baggage: `k=${"v".repeat(MAX_BAGGAGE_BYTES)}` })).toEqual({});
    expect(headers({ traceparent: "", baggage: "" })).toEqual({});
  });
});

describe("freshTraceparent", () => {
  it("is a valid, sampled version-00 traceparent with new ids each time", () => {
    const a = freshTraceparent(() => crypto.randomUUID());
    const b = freshTraceparent(() => crypto.randomUUID());
    expect(a).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(headers({ traceparent: a })).toEqual({ traceparent: a });
    expect(a.split("-")[1]).not.toBe(b.split("-")[1]);
  });
});

describe("an HTTP-invoked function's request", () => {
  it("carries the call's trace context as W3C headers (and none when the call has none)", async () => {
    const seen: Headers[] = [];
    const fetch = (async (_url: string, init?: RequestInit) => {
      seen.push(new Headers(init?.headers));
      return new Response('{"ok":true}', { status: 200 });
    }) as typeof globalThis.fetch;
    const fn = { id: "remote::fn", invocation: { url: "https://fn.example/x" } };
    expect(
      await invokeHttpFunction(fn, {}, { secrets: {}, invocationId: "i-1", fetch, trace: { traceparent: TP, baggage: "a=1" } }),
    ).toEqual({ result: { ok: true } });
    await invokeHttpFunction(fn, {}, { secrets: {}, invocationId: "i-2", fetch });
    expect([seen[0]!.get("traceparent"), seen[0]!.get("baggage")]).toEqual([TP, "a=1"]);
    expect([seen[1]!.get("traceparent"), seen[1]!.get("baggage")]).toEqual([null, null]);
  });
});

describe("queue configuration", () => {
  it("keeps the engine's own prefixes: durable topics and state trigger fires", () => {
    expect(() => parseQueueConfigs(JSON.stringify({ "state:mine": { backend: "durable" } }), true)).toThrow(
      /reserved for the engine's own queues \(state trigger fires\)/,
    );
    expect(() => parseQueueConfigs(JSON.stringify({ "durable:mine": { backend: "durable" } }), true)).toThrow(/reserved/);
  });

  it("wrangler.toml configures turn-step as the harness needs it, beside the existing turns queue", () => {
    const toml = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
    const line = toml.split("\n").find((l) => l.startsWith("QUEUES = '"));
    expect(line).toBeDefined();
    const configs = parseQueueConfigs(line!.slice("QUEUES = '".length, -1), true);
    const byName = new Map(configs.map((c) => [c.name, c]));
    expect(byName.get("turn-step")).toEqual({
      name: "turn-step",
      backend: "durable",
      type: "fifo",
      message_group_field: "session_id",
      // A 300 s model stream plus its hooks.
      timeout_ms: 360_000,
      max_retries: 3,
      backoff_ms: 200,
      concurrency: 100,
      // Owned: only the orchestrator's step functions, queued by whoever serves them.
      consumers: ["turn::*"],
    });
    expect(byName.get("turns")).toMatchObject({ backend: "durable", type: "fifo", message_group_field: "session_id" });
  });
});
