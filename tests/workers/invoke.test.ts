// Invocation routing in workerd, through the engine Worker: the cases of invoke.case.ts (also run
// on the engine core in tests/unit/invoke.test.ts), and the front door's own routes.
import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { NO_REPLY, Wires, type Frame } from "./wire.ts";
import { invokeCases } from "./invoke.case.ts";

invokeCases();

const wires = new Wires();
afterEach(() => wires.closeAll());

describe("front door", () => {
  it("GET /healthz → 200 JSON", async () => {
    const res = await exports.default.fetch("http://localhost/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true, engine: { ok: true, namespace: "default" } });
  });

  it("POST /_iii/invoke → {result}, 404 function_not_found, 504 timeout, 400 bad body", async () => {
    const post = (body: unknown) =>
      exports.default.fetch("http://localhost/_iii/invoke", {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json" },
      });
    let res = await post({ function_id: "state::set", payload: { scope: "fd", key: "k", value: 1 } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ result: { old_value: null, new_value: 1 } });

    const w = await wires.connect();
    w.serve("inv::fd", (d) => ({ got: d }));
    w.serve("inv::fd-never", () => NO_REPLY);
    res = await post({ function_id: "inv::fd", payload: { a: 1 } });
    expect(await res.json()).toEqual({ result: { got: { a: 1 } } });

    res = await post({ function_id: "inv::fd-missing" });
    expect(res.status).toBe(404);
    expect(((await res.json()) as Frame).error.code).toBe("function_not_found");

    res = await post({ function_id: "inv::fd-never", timeout_ms: 200 });
    expect(res.status).toBe(504);
    expect(((await res.json()) as Frame).error.code).toBe("timeout");

    res = await exports.default.fetch("http://localhost/_iii/invoke", { method: "POST", body: "nope" });
    expect(res.status).toBe(400);

    // The namespace is honoured.
    const blue = await wires.connect("/ns/fd-blue");
    blue.serve("inv::blue", () => "blue");
    res = await post({ function_id: "inv::blue", namespace: "fd-blue" });
    expect(await res.json()).toEqual({ result: "blue" });
  });
});
