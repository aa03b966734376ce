// Worker modules hosted in a Worker (`WorkerHost`, @iii-edge/sdk-edge/worker-edge) in the engine
// `npm start` runs: a test-only engine Worker (edge/entry.ts) whose config is the root one with one
// host, TEST_EDGE (edge/test-workers.ts). Its functions serve calls with no socket held, read and
// write engine channels from inside the Worker in the caller's namespace, and bind a trigger type a
// socket worker provides. The same engine checks what `npm start` passes through its env file.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openChannelWriter, readChannel } from "@iii-edge/sdk-edge/channels";
import { registerWorker, type EdgeClient, type TriggerConfig } from "@iii-edge/sdk-edge/node";
import type { StreamChannelRef } from "@iii-edge/protocol";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";
import { edgeTestConfig, type EdgeTestConfig } from "./edge-config.ts";

/** A permissions file that exercises every rule of the env-file encoding (scripts/start.mjs
 * envLines): newlines and a CRLF, all three quote kinds, `$NAME` and `${NAME}` (which dotenv-expand
 * would substitute), `\$`, `#`, a literal `\n`, backslashes before a quote. */
const PERMISSIONS = [
  "# iii-permissions.yaml (test copy)",
  "rules:",
  `  - match: "shell::*"   # a comment`,
  "    decision: deny\r",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${PATH} the YAML reader must keep
  "    reason: 'it''s $HOME and ${PATH} and \\$ here'",
  "  - match: `x` \\n \\\\' done \\'",
  "",
].join("\n");
/** All three quotes, `$`, and a backslash at the very end. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${X} the shell must not expand
const ANTHROPIC_KEY = "k'e`y\"$USER-${X}#1\\";
const NS = "wtns";

let config: EdgeTestConfig;
let engine: EngineServer;
let scratch: string;
const clients: EdgeClient[] = [];

const connect = (ns?: string, name = "wtest-node") => {
  const c = registerWorker(ns ? `${engine.wsUrl}/ns/${ns}` : `${engine.wsUrl}/`, {
    workerName: name,
    reconnectionConfig: { initialDelayMs: 200 },
  });
  clients.push(c);
  return c;
};
const invoke = async (function_id: string, payload: unknown = {}) => {
  const r = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ function_id, payload }),
  });
  return (await r.json()) as { result?: unknown; error?: { code: string; message: string } };
};

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), "iii-edge-wtest-"));
  const permissionsFile = path.join(scratch, "permissions.yaml");
  writeFileSync(permissionsFile, PERMISSIONS);
  config = edgeTestConfig({
    main: path.join(repoRoot, "tests/sdk/edge/entry.ts"),
    hosts: [{ binding: "TEST_EDGE", entrypoint: "TestWorkers" }],
  });
  engine = await startEngine({
    env: {
      III_WRANGLER_CONFIG: config.path,
      III_PERMISSIONS_PATH: permissionsFile,
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      HARNESS_DISABLE: "policy,providers",
      // Unset: npm start makes the state's own key.
      CREDENTIALS_KEY: "",
      AUTH_SECRET: "",
    },
    vars: { TEST_DISABLE: " skipped ," },
  });
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.shutdown()));
  await engine?.stop();
  config?.dispose();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("npm start's settings", () => {
  it("reach the Worker verbatim through the private env file; CREDENTIALS_KEY is the state's own, owner-only", async () => {
    const { result } = await invoke("wtest::env");
    const keyFile = path.join(engine.stateDir, "credentials.key");
    const key = readFileSync(keyFile, "utf8").trim();
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(Buffer.from(key, "base64")).toHaveLength(32);
    expect(result).toEqual({
      runtime: "edge",
      passed: {
        OPENAI_API_KEY: null,
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        ANTHROPIC_API_KEY: ANTHROPIC_KEY,
        ANTHROPIC_BASE_URL: null,
        CREDENTIALS_KEY: key,
        III_PERMISSIONS: PERMISSIONS,
        HARNESS_DISABLE: "policy,providers",
      },
      // configFrom saw the bindings; iii.env holds only the string settings.
      config: { hasDb: true },
      envHasDb: false,
    });
    expect(engine.output().match(/warning: no AUTH_SECRET set/g)).toHaveLength(1);
  });

  it("keep the same credentials key when the engine restarts on the same state", async () => {
    const before = readFileSync(path.join(engine.stateDir, "credentials.key"), "utf8");
    await engine.restart();
    expect(readFileSync(path.join(engine.stateDir, "credentials.key"), "utf8")).toBe(before);
    expect(((await invoke("wtest::env")).result as { passed: { CREDENTIALS_KEY: string } }).passed.CREDENTIALS_KEY).toBe(before.trim());
  });
});

describe("WorkerHost", () => {
  it("registers what its modules declare, with the host as their worker, and leaves disabled modules out", async () => {
    const c = connect();
    const { functions } = await until(async () => {
      const r = (await c.trigger({ function_id: "engine::functions::list", payload: {} })) as {
        functions: { function_id: string; worker_name: string }[];
      };
      return r.functions.some((f) => f.function_id === "wtest::env") ? r : undefined;
    }, "the host's functions");
    const mine = functions.filter((f) => f.function_id.startsWith("wtest::"));
    expect(mine.map((f) => f.function_id).sort()).toEqual([
      "wtest::attach-bad",
      "wtest::env",
      "wtest::greet",
      "wtest::loopback",
      "wtest::on-tick",
      "wtest::put",
      "wtest::read",
      "wtest::registrations",
      "wtest::write",
    ]);
    expect(new Set(mine.map((f) => f.worker_name))).toEqual(new Set(["TEST_EDGE"]));
    expect(await c.trigger({ function_id: "wtest::greet", payload: { name: "ada" } })).toEqual({ text: "hi ada" });
    await expect(c.trigger({ function_id: "wtest::greet", payload: { name: "" } })).rejects.toMatchObject({ code: "invalid_input" });
    // Registered once per isolate, not once per call (workerd makes an entrypoint per call).
    const other = connect(NS);
    for (const w of [c, c, other])
      expect(await until(() => w.trigger({ function_id: "wtest::registrations" }), "wtest::registrations")).toEqual({ registrations: 1 });
  });

  it("iii.trigger inside a handler calls into the namespace of the invocation", async () => {
    const c = connect(NS);
    await until(() => c.trigger({ function_id: "wtest::put", payload: { key: "k1", value: { from: NS } } }), "wtest::put in the namespace");
    expect(await c.trigger({ function_id: "state::get", payload: { scope: "wtest", key: "k1" } })).toEqual({ from: NS });
    const inDefault = connect();
    expect(await inDefault.trigger({ function_id: "state::get", payload: { scope: "wtest", key: "k1" } })).toBeFalsy();
  });
});

describe("channels from a Worker-hosted function", () => {
  const create = (c: EdgeClient) =>
    c.trigger<unknown, { writer: StreamChannelRef; reader: StreamChannelRef }>({ function_id: "engine::channels::create", payload: {} });
  /** The first `count` items a Node reader gets. It stops there rather than at the end: under
   * wrangler dev the end reaches a Node reader 10–30 s late (tests/interop/channels.test.ts,
   * CLOSE_LATENCY_MS); a Worker-side reader sees it at once, which the tests below check. */
  const firstItems = async (url: string, ref: StreamChannelRef, count: number) => {
    const out: string[] = [];
    for await (const item of readChannel(url, ref)) {
      out.push(typeof item === "string" ? item : `bytes:${[...item].join(",")}`);
      if (out.length === count) break;
    }
    return out;
  };

  it("writes a channel a Node reader reads (another namespace): every item in order", async () => {
    const c = connect(NS);
    const { writer, reader } = await create(c);
    const items = Array.from({ length: 50 }, (_, i) => `item-${i}`);
    const read = firstItems(`${engine.wsUrl}/ns/${NS}`, reader, items.length + 1);
    expect(await c.trigger({ function_id: "wtest::write", payload: { writer_ref: writer, items } })).toEqual({ written: 51 });
    expect(await read).toEqual([...items, "bytes:1,2,3"]);
  });

  it("reads a channel a Node writer writes, to its end", async () => {
    const c = connect(NS);
    const { writer, reader } = await create(c);
    const result = c.trigger({ function_id: "wtest::read", payload: { reader_ref: reader } });
    const w = await openChannelWriter(`${engine.wsUrl}/ns/${NS}`, writer);
    for (const s of ["a", "b", "c"]) w.write(s);
    w.write(new Uint8Array([9, 8]));
    w.close();
    expect(await result).toEqual({ items: ["a", "b", "c", "bytes:9,8"] });
    expect(await w.closed).toMatchObject({ code: 1000 });
  });

  it("holds both ends in one Worker: create, write, read back; the writer's close is the engine's 1000, and a late write is refused", async () => {
    const c = connect();
    expect(await c.trigger({ function_id: "wtest::loopback", payload: { items: ["x", "y", "z"] } })).toEqual({
      items: ["x", "y", "z"],
      closed: { code: 1000, reason: expect.any(String) },
      afterClose: "channel_send_failed",
    });
  });

  it("attaching with a wrong key or a reader ref as writer is a typed error", async () => {
    const c = connect();
    const { writer, reader } = await create(c);
    expect(await c.trigger({ function_id: "wtest::attach-bad", payload: { ref: { ...writer, access_key: "0".repeat(32) } } })).toEqual({
      error: "not_found",
    });
    expect(await c.trigger({ function_id: "wtest::attach-bad", payload: { ref: reader } })).toEqual({ error: "invalid_arguments" });
  });
});

describe("a custom trigger type bound by a Worker-hosted function", () => {
  it("is delivered to the socket worker that provides the type, which fires the function", async () => {
    const provider = connect(undefined, "wtest-ticker");
    const fired: unknown[] = [];
    const bound: TriggerConfig<unknown>[] = [];
    provider.registerTriggerType<{ label: string }>(
      { id: "wtest::ticks", description: "ticks on demand (test)" },
      {
        async registerTrigger(t) {
          bound.push(t);
          fired.push(await provider.trigger({ function_id: t.function_id, payload: { tick: 1, label: t.config.label } }));
        },
        async unregisterTrigger() {},
      },
    );
    await until(() => fired.length > 0, "the edge function fired by the provider", 20_000);
    expect(bound).toEqual([expect.objectContaining({ function_id: "wtest::on-tick", config: { label: "from-the-edge" } })]);
    expect(fired).toEqual([
      { got: expect.objectContaining({ tick: 1, label: "from-the-edge" }), function_id: "wtest::on-tick", runtime: "edge" },
    ]);
    const { registered_triggers } = (await provider.trigger({
      function_id: "engine::registered-triggers::list",
      payload: { trigger_type: "wtest::ticks" },
    })) as {
      registered_triggers: { id: string; function_id: string; worker_name: string; status: string }[];
    };
    expect(registered_triggers).toEqual([
      expect.objectContaining({
        id: "wtest::on-tick#wtest::ticks#0",
        function_id: "wtest::on-tick",
        worker_name: "TEST_EDGE",
        status: "active",
      }),
    ]);
  });
});
