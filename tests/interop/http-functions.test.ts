// iii's HTTP-invoked functions (protocol/README.md §9) through `npm start`'s engine: an unmodified
// iii-sdk worker registers a function that lives behind a URL; the engine signs each call with
// HMAC from its own secret, and sdk-edge's receiver verifies it.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpFunctionHandler } from "@iii-edge/sdk-edge/http";
import { nodeHttpListener } from "@iii-edge/sdk-edge/http-node";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { listed, sleep, until, worker, type Worker } from "./sdk.ts";

const SECRET = "hmac-secret-for-tests";

describe("HTTP-invoked functions", () => {
  let engine: EngineServer;
  let server: http.Server;
  let base: string;
  let owner: Worker;
  let caller: Worker;
  const seen: { data: unknown; invocation_id: string | null }[] = [];

  beforeAll(async () => {
    // Loopback targets are refused by default; this engine allows them, as a local setup would.
    // A registration may name only the secrets HTTP_FUNCTION_SECRETS lists (here: sign only).
    engine = await startSecureEngine({
      ALLOW_PRIVATE_HTTP_FUNCTIONS: "true",
      IIIEDGE_TEST_HMAC: SECRET,
      HTTP_FUNCTION_SECRETS: "IIIEDGE_TEST_HMAC:hmac",
    });
    server = http.createServer(
      nodeHttpListener(
        httpFunctionHandler<{ a: number; b: number }>(SECRET, (data, info) => {
          seen.push({ data, invocation_id: info.invocation_id });
          if (data.a < 0) throw Object.assign(new Error("negative input"), { code: "bad_sign" });
          return { product: data.a * data.b };
        }),
      ),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    owner = await worker(engine.wsUrl, "http-owner");
    caller = await worker(engine.wsUrl, "http-caller");
  });
  afterAll(async () => {
    await owner?.shutdown();
    await caller?.shutdown();
    await new Promise((r) => server?.close(r));
    await engine?.stop();
  });

  it("the engine calls the URL, signed, and returns its JSON as the result", async () => {
    owner.registerFunction("remote::multiply", {
      url: `${base}/multiply`,
      method: "POST",
      timeout_ms: 5000,
      auth: { type: "hmac", secret_key: "IIIEDGE_TEST_HMAC" },
    });
    await until(async () => (await listed(caller)).includes("remote::multiply"), "remote::multiply registered");
    expect(await caller.trigger({ function_id: "remote::multiply", payload: { a: 6, b: 7 } })).toEqual({ product: 42 });
    expect(seen.at(-1)?.invocation_id).toBeTruthy();
    // The remote's own {error:{code}} comes back as the call's error.
    await expect(caller.trigger({ function_id: "remote::multiply", payload: { a: -1, b: 2 } })).rejects.toMatchObject({ code: "bad_sign" });
  });

  it("a wrong secret is refused by the receiver, and the caller sees why", async () => {
    const wrong = http.createServer(nodeHttpListener(httpFunctionHandler("another-secret", () => ({ ok: true }))));
    await new Promise<void>((r) => wrong.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(wrong.address() as AddressInfo).port}/x`;
      owner.registerFunction("remote::wrong-secret", { url, auth: { type: "hmac", secret_key: "IIIEDGE_TEST_HMAC" } });
      await until(async () => (await listed(caller)).includes("remote::wrong-secret"), "remote::wrong-secret registered");
      await expect(caller.trigger({ function_id: "remote::wrong-secret", payload: {} })).rejects.toMatchObject({ code: "forbidden" });
    } finally {
      await new Promise((r) => wrong.close(r));
    }
  });

  it("a registration naming a secret the engine does not have is refused and changes nothing", async () => {
    owner.registerFunction("remote::no-secret", { url: `${base}/multiply`, auth: { type: "hmac", secret_key: "NO_SUCH_SECRET" } });
    owner.registerFunction("local::marker", async () => "ok");
    await until(async () => (await listed(caller)).includes("local::marker"), "local::marker registered");
    await sleep(100);
    expect(await listed(caller)).not.toContain("remote::no-secret");
  });

  it("functions disappear with the worker that registered them", async () => {
    await owner.shutdown();
    await until(async () => !(await listed(caller)).includes("remote::multiply"), "remote::multiply removed");
    await expect(caller.trigger({ function_id: "remote::multiply", payload: { a: 1, b: 1 } })).rejects.toMatchObject({
      code: "function_not_found",
    });
  });
});
