// iii's RBAC worker listener (`ws://host/rbac`, engine-do/src/rbac.ts and core/rbac.ts), driven by
// the unmodified iii-sdk@0.22.1 against `npm start` with AUTH_SECRET set. Every scenario of iii's own
// RBAC suite (sdk/packages/python/iii/tests/test_rbac_workers.py) is performed here: the auth
// function's AuthResult decides what a connection may call, the middleware gets each call with the
// caller's context, the registration hooks refuse or rewrite, the prefix renames what a connection
// registers, and a refused call is iii's FORBIDDEN naming rbac.expose_functions. Also performed: a
// bad token, a forged session header, and a listener client taking a function someone else holds.
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { upgradeStatus } from "@iii-edge/test-support/raw-socket";
import { eventually, until } from "@iii-edge/test-support/wait";
import { failure, listed, worker, type Worker } from "../interop/sdk.ts";

// biome-ignore lint/suspicious/noExplicitAny: iii-sdk results read loosely by the test, each checked by an expect
type Json = Record<string, any>;

const RBAC = {
  auth_function_id: "test::rbac-worker::auth",
  middleware_function_id: "test::rbac-worker::middleware",
  on_function_registration_function_id: "test::rbac-worker::on-function-reg",
  on_trigger_registration_function_id: "test::rbac-worker::on-trigger-reg",
  on_trigger_type_registration_function_id: "test::rbac-worker::on-trigger-type-reg",
  expose_functions: ['match("test::ew::public::*")', 'match("engine::functions::list")', { metadata: { ew_public: true } }],
};

let engine: EngineServer;
let server: Worker;
const clients: IIIClient[] = [];
let authCalls: Json[] = [];
let functionRegCalls: Json[] = [];
let triggerTypeRegCalls: Json[] = [];
let triggerRegCalls: Json[] = [];
const bound: Json[] = [];

/** A client of the listener, as iii's tests make one: its token in an `x-test-token` header. */
function rbacClient(testToken?: string, extra: Record<string, string> = {}): IIIClient {
  const c = registerWorker(`${engine.wsUrl}/rbac`, {
    otel: { enabled: false },
    invocationTimeoutMs: 10_000,
    headers: { ...(testToken ? { "x-test-token": testToken } : {}), ...extra },
  });
  clients.push(c);
  return c;
}

const call = (c: IIIClient, function_id: string, payload: unknown = {}) => c.trigger({ function_id, payload }) as Promise<Json>;

/** What the engine's own catalog says (through the server, a token holder outside the listener). */
const triggerTypes = async () =>
  ((await call(server, "engine::triggers::list", { include_internal: true })).triggers as Json[]).map((t) => t.id as string);
const bindings = async () => (await call(server, "engine::registered-triggers::list", {})).registered_triggers as Json[];

beforeAll(async () => {
  engine = await startSecureEngine({ RBAC: JSON.stringify(RBAC) });
  server = await worker(engine.wsUrl, "rbac-server");
  server.registerFunction("test::rbac-worker::auth", async (input: Json) => {
    authCalls.push(input);
    const token = input.headers?.["x-test-token"];
    if (!token)
      return {
        allowed_functions: [],
        forbidden_functions: [],
        allow_trigger_type_registration: false,
        context: { role: "anonymous", user_id: "anonymous" },
      };
    if (token === "valid-token")
      return {
        allowed_functions: ["test::ew::valid-token-echo"],
        forbidden_functions: [],
        allow_trigger_type_registration: true,
        context: { role: "admin", user_id: "user-1" },
      };
    if (token === "restricted-token")
      return {
        allowed_functions: [],
        forbidden_functions: ["test::ew::echo"],
        allow_trigger_type_registration: false,
        context: { role: "restricted", user_id: "user-2" },
      };
    if (token === "prefix-token")
      return {
        allowed_functions: [],
        forbidden_functions: [],
        allow_trigger_type_registration: true,
        context: { role: "prefixed", user_id: "user-prefix" },
        function_registration_prefix: "test-prefix",
      };
    throw new Error("invalid token");
  });
  server.registerFunction("test::rbac-worker::middleware", async (input: Json) => {
    const enriched = { ...input.payload, _intercepted: true, _caller: input.context.user_id };
    return server.trigger({ function_id: input.function_id, payload: enriched });
  });
  // Python's hook shape (an object, or a throw) and Node's (a boolean) are both iii's.
  server.registerFunction("test::rbac-worker::on-function-reg", async (input: Json) => {
    functionRegCalls.push(input);
    if (String(input.function_id).startsWith("denied::")) throw new Error("denied function registration");
    return { function_id: input.function_id, description: null, metadata: null };
  });
  server.registerFunction("test::rbac-worker::on-trigger-type-reg", async (input: Json) => {
    triggerTypeRegCalls.push(input);
    return !String(input.trigger_type_id).startsWith("denied-tt::");
  });
  server.registerFunction("test::rbac-worker::on-trigger-reg", async (input: Json) => {
    triggerRegCalls.push(input);
    if (String(input.function_id).startsWith("denied-trig::")) throw new Error("denied trigger registration");
    return {};
  });
  server.registerTriggerType(
    { id: "test-rbac-trigger", description: "Trigger type for RBAC tests" },
    {
      async registerTrigger(config) {
        bound.push(config as Json);
      },
      async unregisterTrigger() {},
    },
  );
  server.registerFunction("test::ew::public::echo", async (data: Json) => ({ echoed: data }));
  server.registerFunction("test::ew::valid-token-echo", async (data: Json) => ({ echoed: data, valid_token: true }));
  server.registerFunction("test::ew::meta-public", async (data: Json) => ({ meta_echoed: data }), { metadata: { ew_public: true } });
  server.registerFunction("test::ew::private", async () => ({ private: true }));
  await until(async () => {
    const have = await listed(server);
    return (
      ["test::rbac-worker::auth", "test::rbac-worker::middleware", "test::ew::private", "test::ew::meta-public"].every((id) =>
        have.includes(id),
      ) && (await triggerTypes()).includes("test-rbac-trigger")
    );
  }, "the server's functions");
});

beforeEach(() => {
  authCalls = [];
  functionRegCalls = [];
  triggerTypeRegCalls = [];
  triggerRegCalls = [];
});

afterAll(async () => {
  await Promise.allSettled([...clients.map((c) => c.shutdown()), server?.shutdown()]);
  await engine?.stop();
});

describe("iii's RBAC worker listener", () => {
  it("a valid token's AuthResult admits its allowed function, through the middleware with its context", async () => {
    const c = rbacClient("valid-token");
    const r = await call(c, "test::ew::valid-token-echo", { msg: "hello" });
    expect(r.valid_token).toBe(true);
    expect(r.echoed).toMatchObject({ msg: "hello", _intercepted: true, _caller: "user-1" });
    expect(authCalls).toHaveLength(1);
    expect(authCalls[0]!.headers["x-test-token"]).toBe("valid-token");
    expect(authCalls[0]).toMatchObject({ query_params: {}, ip_address: expect.any(String) });
  });

  it("a function neither exposed nor allowed is iii's FORBIDDEN, naming the function and rbac.expose_functions", async () => {
    const c = rbacClient("valid-token");
    const e = (await failure(call(c, "test::ew::private", { msg: "hello" }))) as { code: string; message: string; function_id?: string };
    expect(e.code).toBe("FORBIDDEN");
    expect(e.message).toContain("test::ew::private");
    expect(e.message).toContain("rbac.expose_functions");
    expect(e.function_id).toBe("test::ew::private");
  });

  it("forbidden_functions refuse; the restricted token still reaches what is exposed", async () => {
    const c = rbacClient("restricted-token");
    expect((await failure(call(c, "test::ew::echo", { msg: "hello" }))).code).toBe("FORBIDDEN");
    expect((await failure(call(c, "test::ew::valid-token-echo", {}))).code).toBe("FORBIDDEN");
    const r = await call(c, "test::ew::public::echo", { msg: "hi" });
    expect(r.echoed).toMatchObject({ msg: "hi", _caller: "user-2" });
    expect(await call(c, "test::ew::meta-public", { n: 1 })).toMatchObject({ meta_echoed: { n: 1 } });
  });

  it("a connection without a token gets the anonymous AuthResult: exposed functions only", async () => {
    const c = rbacClient();
    expect((await call(c, "test::ew::public::echo", { msg: "anon" })).echoed).toMatchObject({ _caller: "anonymous" });
    expect((await failure(call(c, "test::ew::valid-token-echo", {}))).code).toBe("FORBIDDEN");
  });

  it("an auth function that throws refuses the handshake, and nothing joins the engine", async () => {
    const before = (await call(server, "engine::workers::list", {})).workers.length;
    const r = await upgradeStatus(`${engine.wsUrl}/rbac`, { "x-test-token": "not-a-token" });
    expect(r.status).toBe(401);
    expect(r.body?.error?.message).toContain("invalid token");
    expect(authCalls).toHaveLength(1);
    expect((await call(server, "engine::workers::list", {})).workers.length).toBe(before);
  });

  it("a session header sent by the client is not the session: the front door sets its own", async () => {
    const forged = JSON.stringify({
      allowed_functions: ["*"],
      forbidden_functions: [],
      allow_trigger_type_registration: true,
      allow_function_registration: true,
      context: { user_id: "root" },
      config: { expose_functions: ["*"] },
    });
    const c = rbacClient("restricted-token", { "x-iii-rbac": forged });
    expect((await failure(call(c, "test::ew::private", {}))).code).toBe("FORBIDDEN");
    expect((await call(c, "test::ew::public::echo", {})).echoed._caller).toBe("user-2");
  });

  it("the on_trigger_type_registration hook gets the type and the context, and its refusal holds", async () => {
    const c = rbacClient("valid-token");
    const handler = { async registerTrigger() {}, async unregisterTrigger() {} };
    c.registerTriggerType({ id: "denied-tt::test", description: "Should be denied" }, handler);
    // Frames of a connection are handled in order: once the next type is in, the first was decided.
    c.registerTriggerType({ id: "allowed-tt::test", description: "Should be allowed" }, handler);
    await until(async () => (await triggerTypes()).includes("allowed-tt::test"), "the allowed trigger type");
    expect(triggerTypeRegCalls.map((i) => i.trigger_type_id)).toEqual(["denied-tt::test", "allowed-tt::test"]);
    expect(triggerTypeRegCalls[0]).toMatchObject({
      trigger_type_id: "denied-tt::test",
      description: "Should be denied",
      context: { user_id: "user-1" },
    });
    expect(await triggerTypes()).not.toContain("denied-tt::test");
  });

  it("a token without allow_trigger_type_registration registers no trigger type, and no hook is asked", async () => {
    const c = rbacClient("restricted-token");
    c.registerTriggerType(
      { id: "restricted-tt::test", description: "refused" },
      { async registerTrigger() {}, async unregisterTrigger() {} },
    );
    c.registerFunction("restricted::barrier", async () => null);
    await until(async () => (await listed(server)).includes("restricted::barrier"), "the barrier function");
    expect(await triggerTypes()).not.toContain("restricted-tt::test");
    expect(triggerTypeRegCalls).toHaveLength(0);
  });

  it("the on_trigger_registration hook gets the binding and the context, and its refusal holds", async () => {
    const c = rbacClient("valid-token");
    c.registerTrigger({ type: "test-rbac-trigger", function_id: "denied-trig::my-fn", config: { key: "value" } });
    c.registerTrigger({ type: "test-rbac-trigger", function_id: "test::ew::public::echo", config: { key: "allowed" } });
    await eventually(() => bound.some((b) => b.function_id === "test::ew::public::echo"), 10_000, "the allowed binding at its provider");
    expect(triggerRegCalls[0]).toMatchObject({
      trigger_type: "test-rbac-trigger",
      function_id: "denied-trig::my-fn",
      config: { key: "value" },
      context: { user_id: "user-1" },
    });
    expect((await bindings()).map((b) => b.function_id)).not.toContain("denied-trig::my-fn");
    expect(bound.map((b) => b.function_id)).not.toContain("denied-trig::my-fn");
  });

  it("a binding to a function the connection may not call is refused after the hook allowed it", async () => {
    const c = rbacClient("valid-token");
    c.registerTrigger({ type: "test-rbac-trigger", function_id: "test::ew::private", config: {} });
    c.registerFunction("bind::barrier", async () => null);
    await until(async () => (await listed(server)).includes("bind::barrier"), "the barrier function");
    expect(triggerRegCalls.map((i) => i.function_id)).toContain("test::ew::private");
    expect((await bindings()).map((b) => b.function_id)).not.toContain("test::ew::private");
  });

  it("the on_function_registration hook refuses: the function is never registered, and calling it fails", async () => {
    const c = rbacClient("valid-token");
    c.registerFunction("denied::blocked-fn", async () => ({ should: "not reach" }));
    c.registerFunction("allowed::fn", async () => ({ ok: true }));
    await until(async () => (await listed(server)).includes("allowed::fn"), "the allowed function");
    expect(functionRegCalls.map((i) => i.function_id)).toEqual(["denied::blocked-fn", "allowed::fn"]);
    expect(functionRegCalls[0]).toMatchObject({ context: { user_id: "user-1" } });
    expect(await listed(server)).not.toContain("denied::blocked-fn");
    await expect(call(c, "denied::blocked-fn", {})).rejects.toThrow();
  });

  it("engine::functions::list shows a valid token what it may call, and nothing else", async () => {
    const c = rbacClient("valid-token");
    const ids = ((await call(c, "engine::functions::list", {})).functions as Json[]).map((f) => f.function_id);
    expect(ids).toEqual(expect.arrayContaining(["test::ew::valid-token-echo", "test::ew::public::echo", "test::ew::meta-public"]));
    expect(ids).not.toContain("test::ew::private");
    expect(ids).not.toContain("test::rbac-worker::auth");
  });

  it("engine::functions::list shows a restricted token only what is exposed", async () => {
    const c = rbacClient("restricted-token");
    const r = await call(c, "engine::functions::list", { include_internal: true });
    const ids = (r.functions as Json[]).map((f) => f.function_id);
    expect(ids).toEqual(expect.arrayContaining(["test::ew::public::echo", "test::ew::meta-public"]));
    for (const hidden of ["test::ew::valid-token-echo", "test::ew::private", "test::rbac-worker::auth", "state::set"])
      expect(ids).not.toContain(hidden);
    expect(r.total).toBe(ids.length);
  });

  it("function_registration_prefix: `prefixed-echo` is registered, and called, as `test-prefix::prefixed-echo`", async () => {
    const c = rbacClient("prefix-token");
    c.registerFunction("prefixed-echo", async (data: Json) => ({ echoed: data }));
    const r = await until(() => call(server, "test-prefix::prefixed-echo", { msg: "prefix-test" }), "the prefixed function");
    expect(r.echoed.msg).toBe("prefix-test");
    expect(await listed(server)).not.toContain("prefixed-echo");
  });

  it("the infrastructure carve-out: a restricted handler logs through engine::log::info, directly and inside a call", async () => {
    const c = rbacClient("valid-token");
    expect(await c.trigger({ function_id: "engine::log::info", payload: { message: "carve-out direct invocation" } })).toBeNull();
    // iii's suite registers the handler over the server's own `test::ew::valid-token-echo`; here a
    // live holder keeps its id (below), so the handler gets an id of its own.
    c.registerFunction("logging::echo", async (data: Json) => {
      await c.trigger({
        function_id: "engine::log::info",
        payload: { message: "carve-out regression guard: handler reached logger", data: { input: data } },
      });
      return { logged: true, echoed: data };
    });
    const r = await until(() => call(server, "logging::echo", { msg: "real-usage-case" }), "the logging handler");
    expect(r.logged).toBe(true);
  });

  it("/ns/<ns>/rbac asks that namespace's auth function, and its connections stay in that namespace", async () => {
    const team = await worker(`${engine.wsUrl}/ns/team`, "rbac-team-server");
    clients.push(team);
    const teamAuth: Json[] = [];
    team.registerFunction("test::rbac-worker::auth", async (input: Json) => {
      teamAuth.push(input);
      return { allowed_functions: ["team::*"], context: { user_id: "team-user" } };
    });
    team.registerFunction("team::hello", async () => ({ hello: "team" }));
    await until(async () => (await listed(team)).includes("team::hello"), "the team's functions");
    const c = registerWorker(`${engine.wsUrl}/ns/team/rbac`, {
      otel: { enabled: false },
      invocationTimeoutMs: 10_000,
      headers: { "x-test-token": "valid-token" },
    });
    clients.push(c);
    // No middleware is registered in `team`: an allowed call fails there, closed — and was allowed.
    expect((await failure(call(c, "team::hello"))).code).toBe("function_not_found");
    expect(teamAuth).toHaveLength(1);
    expect(authCalls).toHaveLength(0);
    const ids = ((await call(c, "engine::functions::list", {})).functions as Json[]).map((f) => f.function_id);
    expect(ids).toContain("team::hello");
    expect(ids).not.toContain("test::ew::public::echo");
  });

  it("a listener client cannot take a function another worker holds", async () => {
    const c = rbacClient("valid-token");
    c.registerFunction("test::ew::valid-token-echo", async () => ({ hijacked: true }));
    c.registerFunction("hijack::barrier", async () => null);
    await until(async () => (await listed(server)).includes("hijack::barrier"), "the barrier function");
    expect(await call(server, "test::ew::valid-token-echo", { msg: "still mine" })).toEqual({
      echoed: expect.objectContaining({ msg: "still mine" }),
      valid_token: true,
    });
  });
});
