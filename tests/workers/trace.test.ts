// Trace context from the front door (protocol/README.md §4.8): an http route and POST /_iii/invoke
// honour the request's W3C `traceparent` / `baggage` headers, asserted on the invokefunction frames
// the handler's worker receives; the engine's span is the parent of what arrives (IN_TRACE). Trigger
// fires, queue attempts and cron occurrences are engine-core behaviour: tests/unit/trace.test.ts runs
// them on the engine core in-process. tests/node/telemetry*.test.ts checks the parentage.
import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { Wires, uuid, type Frame } from "./wire.ts";
import { BAGGAGE, IN_TRACE, TRACEPARENT, firstCallOf, traceId } from "./trace-context.ts";

const wires = new Wires();
afterEach(() => wires.closeAll());

describe("requests through the front door continue the caller's trace", () => {
  it("http: the request's traceparent / baggage headers reach its middleware and function; a malformed traceparent is ignored", async () => {
    const w = await wires.connect();
    const path = `tr-http-${uuid()}`;
    const seen: Frame[] = [];
    const middleware = firstCallOf(w, "tr::mw", () => ({ action: "continue" }));
    w.serve("tr::route", (_d, f) => (seen.push(f), { body: "ok" }));
    w.send({
      type: "registertrigger",
      id: `t-${path}`,
      trigger_type: "http",
      function_id: "tr::route",
      config: { api_path: path, middleware_function_ids: ["tr::mw"] },
    });
    await w.ok("state::list_groups");
    const res = await exports.default.fetch(`http://localhost/${path}`, { headers: { traceparent: TRACEPARENT, baggage: BAGGAGE } });
    expect(res.status).toBe(200);
    await res.text();
    expect(await middleware).toMatchObject(IN_TRACE);
    expect(seen[0]).toMatchObject(IN_TRACE);
    const bad = await exports.default.fetch(`http://localhost/${path}`, { headers: { traceparent: "00-not-a-trace-01" } });
    await bad.text();
    // Ignored (W3C): the request starts a trace of its own, its server span the root.
    expect(seen[1]!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(traceId(seen[1]!.traceparent as string)).not.toBe(traceId(TRACEPARENT));
  });

  it("POST /_iii/invoke honours the caller's traceparent / baggage headers", async () => {
    const w = await wires.connect();
    const seen = firstCallOf(w, "tr::invoked", () => "hi");
    await w.ok("state::list_groups");
    const res = await exports.default.fetch("http://localhost/_iii/invoke", {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: TRACEPARENT, baggage: BAGGAGE },
      body: JSON.stringify({ function_id: "tr::invoked", payload: {} }),
    });
    expect(await res.json()).toEqual({ result: "hi" });
    expect(await seen).toMatchObject(IN_TRACE);
  });
});
