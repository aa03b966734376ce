// The provisioning worker alone against the engine core served in-process (tests/support/node-engine.ts). Stand-ins register what other
// workers own (the skills directory, the models catalog, the sandbox host, and harness-internal
// ids that must stay out of the model's view); a function the model should see is registered by
// the unmodified iii-sdk a moment before the run is provisioned.
import { AGENT_TRIGGER_FUNCTION, type ProvisioningPrepareResponse } from "@iii-edge/protocol/harness";
import type { FunctionRef } from "@iii-edge/sdk-edge/client";
import { runWorkers, type RunningWorkers, type WorkerModule } from "@iii-edge/sdk-edge/worker-node";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { IDENTITY_PREAMBLE, modeParagraph, skillPlaceholder, worker } from "../src/index.ts";

const DEFAULT_SKILL = "iii://demo/default";
const MODEL = { id: "gpt-test", provider: "openai", context_window: 128_000, supports_tools: true };

let engine: NodeEngine;
let provisioning: RunningWorkers;
let standIn: RunningWorkers;
let sdk: IIIClient | undefined;
const calls: { fn: string; data: Record<string, unknown> }[] = [];
const live = new Set<string>();
let sandboxCreateFails = false;
let sandboxes = 0;
const refs = new Map<string, FunctionRef>();

const callsTo = (fn: string) => calls.filter((c) => c.fn === fn);
const strip = ({ _caller_worker_id: _, ...rest }: Record<string, unknown>) => rest;

async function listed(): Promise<string[]> {
  const r = await standIn.client.trigger<unknown, { functions: { function_id: string }[] }>({
    function_id: "engine::functions::list",
    payload: { include_internal: true },
  });
  return r.functions.map((f) => f.function_id);
}

const prepare = (run_request: Record<string, unknown>, session_id = "s1") =>
  standIn.client.trigger<unknown, ProvisioningPrepareResponse>({
    function_id: "provisioning::prepare",
    payload: { session_id, run_request: { provider: "openai", model: "gpt-test", ...run_request } },
  });

/** The catalog section of a prompt (it comes last, before an optional sandbox note). */
const catalogOf = (prompt: string) => prompt.slice(prompt.indexOf("# Live function catalog")).split("\n# Sandbox")[0]!;

beforeAll(async () => {
  engine = await startNodeEngine();
  provisioning = runWorkers(engine.wsUrl, [worker as WorkerModule<never>], {
    config: { provisioning: { system_default_skills: [DEFAULT_SKILL] } },
  });
  standIn = runWorkers(engine.wsUrl, [], { workerName: "stand-ins" });
  const record = (fn: string, answer: (data: Record<string, unknown>) => unknown, description?: string) =>
    refs.set(
      fn,
      standIn.client.registerFunction(
        fn,
        (data: Record<string, unknown>) => {
          calls.push({ fn, data: strip(data) });
          return answer(data);
        },
        description ? { description } : undefined,
      ),
    );
  record("directory::skills::index", () => "INDEX: demo/default, demo/good, demo/broken");
  record("directory::skills::get", (d) => {
    if (d.id === "iii://demo/broken") throw new Error("skill store offline");
    return d.id === DEFAULT_SKILL ? "DEFAULT SKILL BODY" : { body: `BODY OF ${String(d.id)}` };
  });
  record("models::get", (d) => (d.provider === "openai" && d.id === "gpt-test" ? MODEL : null));
  record("sandbox::create", () => {
    if (sandboxCreateFails) throw Object.assign(new Error("no capacity left"), { code: "limit_exceeded" });
    const id = `sbx-${++sandboxes}`;
    live.add(id);
    return { sandbox_id: id, backend: "process", from_pool: false, boot_ms: 1, memory_mb: 256, vcpus: 1, disk_mb: 64, timeout_s: 300 };
  });
  record("sandbox::list", () => ({ sandboxes: [...live].map((sandbox_id) => ({ sandbox_id, backend: "process", busy: false })) }));
  record("sandbox::stop", (d) => {
    live.delete(String(d.sandbox_id));
    return { sandbox_id: d.sandbox_id, destroyed: true };
  });
  // Harness internals: registered, and never to be shown to the model.
  for (const id of [
    "turn::assistant_streaming",
    "run::start",
    "provider::openai::stream",
    "auth::get_token",
    "session-tree::messages",
    "session-inbox::push",
  ])
    record(id, () => null, `internal ${id}`);
  await until(async () => {
    const have = await listed();
    return have.includes("provisioning::prepare") && have.includes("session-inbox::push");
  }, "provisioning and the stand-ins registered");
});

afterAll(async () => {
  await Promise.allSettled([provisioning?.shutdown(), standIn?.shutdown(), sdk?.shutdown()]);
  await engine?.stop();
});

describe("the system prompt", () => {
  it("three layers: the mode's paragraph, the identity preamble, the skills; one agent_trigger schema; model_meta from models::get", async () => {
    for (const mode of ["plan", "ask", "agent"] as const) {
      const res = await prepare({ mode });
      expect(res.system_prompt.startsWith(`${modeParagraph(mode)}\n\n${IDENTITY_PREAMBLE}\n\n# Skills`)).toBe(true);
      expect(res.function_schemas).toEqual([AGENT_TRIGGER_FUNCTION]);
      expect(res.model_meta).toEqual(MODEL);
      expect(res.sandbox_id).toBeUndefined();
    }
    expect(modeParagraph("plan")).toContain("numbered plan");
    expect(modeParagraph("ask")).toContain("briefly");
    expect(modeParagraph("agent")).toContain("autonomously");
  });

  it("no mode, no paragraph: the prompt opens with the identity preamble; the default skill and the index follow", async () => {
    const res = await prepare({ mode: null });
    expect(res.system_prompt.startsWith(IDENTITY_PREAMBLE)).toBe(true);
    expect(res.system_prompt).toContain("INDEX: demo/default, demo/good, demo/broken");
    expect(res.system_prompt).toContain(`# ${DEFAULT_SKILL}\n\nDEFAULT SKILL BODY`);
  });

  it("a non-empty system_prompt is used verbatim: no layers, no catalog", async () => {
    const override = "You are a terse assistant.\n\nNever call functions.";
    const res = await prepare({ mode: "agent", system_prompt: override, skills: ["iii://demo/good"] });
    expect(res.system_prompt).toBe(override);
    expect(res.function_schemas).toEqual([AGENT_TRIGGER_FUNCTION]);
    expect(res.model_meta).toEqual(MODEL);
    // An empty one is no override.
    expect((await prepare({ system_prompt: "" })).system_prompt.startsWith(IDENTITY_PREAMBLE)).toBe(true);
  });

  it("run skills after the defaults, each under its id; one the directory cannot serve becomes a note to fetch it later", async () => {
    const res = await prepare({ skills: ["iii://demo/good", "iii://demo/broken"] });
    const p = res.system_prompt;
    expect(p).toContain("# iii://demo/good\n\nBODY OF iii://demo/good");
    expect(p).toContain(`# iii://demo/broken\n\n${skillPlaceholder("iii://demo/broken")}`);
    expect(skillPlaceholder("x")).toContain("directory::skills::get");
    expect(p.indexOf(`# ${DEFAULT_SKILL}`)).toBeLessThan(p.indexOf("# iii://demo/good"));
    const fetched = callsTo("directory::skills::get")
      .slice(-3)
      .map((c) => c.data.id);
    expect(fetched.sort()).toEqual(["iii://demo/broken", DEFAULT_SKILL, "iii://demo/good"]);
  });

  it("model_meta is null for a model the catalog does not know", async () => {
    expect((await prepare({ model: "unknown-model" })).model_meta).toBeNull();
  });

  it("a request without a model is refused with invalid_input", async () => {
    const err = await standIn.client
      .trigger({ function_id: "provisioning::prepare", payload: { session_id: "s1", run_request: { mode: "agent" } } })
      .then(
        () => undefined,
        (e: { code: string; message: string }) => e,
      );
    expect(err?.code).toBe("invalid_input");
    expect(err?.message).toContain("model");
  });
});

describe("the live catalog", () => {
  it("a function an iii-sdk worker registered a moment ago is in the prompt with its description and request schema", async () => {
    sdk = registerWorker(engine.wsUrl, { workerName: "weather-app", otel: { enabled: false } });
    const schema = {
      type: "object" as const,
      properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
      required: ["city"],
    };
    sdk.registerFunction("weather::forecast", async (req: { city: string }) => ({ city: req.city, sky: "clear" }), {
      description: "The forecast for a city.",
      request_format: schema,
    });
    await until(async () => (await listed()).includes("weather::forecast"), "weather::forecast registered");
    const catalog = catalogOf((await prepare({ mode: "agent" })).system_prompt);
    expect(catalog).toContain(`- \`weather::forecast\` — The forecast for a city.\n  request: ${JSON.stringify(schema)}`);
  });

  it("engine internals and harness-internal ids stay out; the stand-ins' public functions and built-ins stay in", async () => {
    const catalog = catalogOf((await prepare({})).system_prompt);
    const ids = [...catalog.matchAll(/^- `([^`]+)`/gm)].map((m) => m[1]!);
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) expect(id).not.toMatch(/^(engine::|turn::|run::|provisioning::|provider::|auth::|session-)/);
    expect(ids).toEqual(expect.arrayContaining(["models::get", "sandbox::create", "directory::skills::get", "state::get"]));
    expect(ids).not.toContain("provisioning::prepare");
  });
});

describe("isolation", () => {
  it("isolation: sandbox::create gives the run a sandbox named in the prompt; release stops it", async () => {
    const res = await prepare({ isolation: true }, "iso-1");
    expect(res.sandbox_id).toMatch(/^sbx-/);
    expect(callsTo("sandbox::create").at(-1)!.data).toEqual({});
    expect(res.system_prompt).toContain(`isolated sandbox, \`${res.sandbox_id}\``);
    expect(live.has(res.sandbox_id!)).toBe(true);

    expect(
      await standIn.client.trigger({ function_id: "provisioning::release", payload: { session_id: "iso-1", sandbox_id: res.sandbox_id } }),
    ).toEqual({ ok: true });
    expect(callsTo("sandbox::stop").at(-1)!.data).toEqual({ sandbox_id: res.sandbox_id });
    expect(live.has(res.sandbox_id!)).toBe(false);
  });

  it("a stored sandbox that still runs is reused; one that is gone is replaced", async () => {
    const first = await prepare({ isolation: true }, "iso-2");
    const creates = callsTo("sandbox::create").length;
    const again = await prepare({ isolation: true, sandbox_id: first.sandbox_id }, "iso-2");
    expect(again.sandbox_id).toBe(first.sandbox_id);
    expect(callsTo("sandbox::create").length).toBe(creates);
    const replaced = await prepare({ isolation: true, sandbox_id: "sbx-reaped" }, "iso-2");
    expect(replaced.sandbox_id).not.toBe("sbx-reaped");
    expect(callsTo("sandbox::create").length).toBe(creates + 1);
  });

  it("without isolation no sandbox is touched; release without a sandbox is ok and stops nothing", async () => {
    const creates = callsTo("sandbox::create").length;
    const stops = callsTo("sandbox::stop").length;
    expect((await prepare({ isolation: false })).sandbox_id).toBeUndefined();
    expect(await standIn.client.trigger({ function_id: "provisioning::release", payload: { session_id: "s1" } })).toEqual({ ok: true });
    expect(callsTo("sandbox::create").length).toBe(creates);
    expect(callsTo("sandbox::stop").length).toBe(stops);
  });

  it("a sandbox host that refuses is a typed sandbox_unavailable error carrying its code and message", async () => {
    sandboxCreateFails = true;
    try {
      const err = await prepare({ isolation: true }, "iso-3").then(
        () => undefined,
        (e: { code: string; message: string }) => e,
      );
      expect(err?.code).toBe("sandbox_unavailable");
      expect(err?.message).toContain("limit_exceeded");
      expect(err?.message).toContain("no capacity left");
    } finally {
      sandboxCreateFails = false;
    }
  });
});

describe("optional workers absent", () => {
  it("no models worker: model_meta is null; no sandbox host: sandbox_unavailable says to start one; no directory: placeholders", async () => {
    for (const id of ["models::get", "sandbox::create", "directory::skills::get", "directory::skills::index"]) refs.get(id)!.unregister();
    await until(async () => !(await listed()).includes("directory::skills::index"), "the stand-ins gone");
    const res = await prepare({ skills: ["iii://demo/good"] });
    expect(res.model_meta).toBeNull();
    expect(res.system_prompt).toContain(`# iii://demo/good\n\n${skillPlaceholder("iii://demo/good")}`);
    expect(res.system_prompt).toContain(`# ${DEFAULT_SKILL}\n\n${skillPlaceholder(DEFAULT_SKILL)}`);
    const err = await prepare({ isolation: true }, "iso-4").then(
      () => undefined,
      (e: { code: string; message: string }) => e,
    );
    expect(err?.code).toBe("sandbox_unavailable");
    expect(err?.message).toContain("no sandbox host is connected");
  });
});
