// sandbox::* as the engine sees them, through a recording stand-in for the worker kit's surface: every
// function is registered with formats, requests are validated against the published contract,
// failures carry a typed code (property and message prefix), and streaming triggers the caller.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { InvocationContext, TriggerRequest } from "@iii-edge/sdk-edge/client";
import type { WorkerFunctionOptions, WorkerHandler } from "@iii-edge/sdk-edge/worker";
import { type SandboxFunctionId, formatsOf, sandboxContracts } from "../src/contract.ts";
import { type SandboxSurface, registerSandboxFunctions } from "../src/functions.ts";
import { Sandboxes } from "../src/sandboxes.ts";
import { qemuMissing, tcgBackend, testStateDir } from "./support.ts";

type Published = { request_format?: { type?: string }; response_format?: { type?: string } };

/** The worker kit's surface as the engine would drive it, recording what is registered and called. */
class RecordingSurface implements SandboxSurface {
  readonly functions = new Map<string, { reg: WorkerFunctionOptions & Published; handler: WorkerHandler }>();
  readonly triggers: TriggerRequest[] = [];
  readonly channels = {} as SandboxSurface["channels"];
  registerFunction(id: string, handler: WorkerHandler, options?: WorkerFunctionOptions): void {
    this.functions.set(id, { reg: (options ?? {}) as WorkerFunctionOptions & Published, handler });
  }
  async trigger<TInput = unknown, TOutput = unknown>(req: TriggerRequest<TInput>): Promise<TOutput> {
    this.triggers.push(req as TriggerRequest);
    return undefined as TOutput;
  }
  /** Call like the engine would: a JSON round trip in and out. */
  // biome-ignore lint/suspicious/noExplicitAny: results read loosely by the test, each checked by an expect
  async call(id: string, payload: unknown): Promise<any> {
    const f = this.functions.get(id);
    if (!f) throw new Error(`function_not_found: ${id}`);
    const ctx = { function_id: id, metadata: undefined, trigger: (r: TriggerRequest) => this.trigger(r) } as InvocationContext;
    return JSON.parse(JSON.stringify(await f.handler(JSON.parse(JSON.stringify(payload)), ctx)));
  }
}

/** Whether `answer` is one the function's response contract reads. */
const answers = (id: SandboxFunctionId, answer: unknown) => sandboxContracts[id].response.safeParse(answer).success;

async function errorOf(p: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await p;
  } catch (e) {
    return e as { code?: string; message: string };
  }
  throw new Error("expected a rejection");
}

describe.skipIf(qemuMissing)(`sandbox::* functions${qemuMissing ? ` (skipped: ${qemuMissing})` : ""}`, () => {
  const client = new RecordingSurface();
  let sandboxes: Sandboxes;

  beforeAll(async () => {
    sandboxes = new Sandboxes({ backend: tcgBackend(testStateDir("functions")), poolSize: 0 });
    await sandboxes.start();
    registerSandboxFunctions(client, sandboxes, { backendReason: "test" });
  });
  afterAll(async () => {
    await sandboxes?.shutdown();
  });

  test("every function is registered with a description and JSON Schema formats", () => {
    expect([...client.functions.keys()].sort()).toEqual([
      "sandbox::create",
      "sandbox::destroy",
      "sandbox::exec",
      "sandbox::info",
      "sandbox::list",
      "sandbox::read_file",
      "sandbox::stop",
      "sandbox::write_file",
    ]);
    for (const [id, { reg }] of client.functions) {
      expect(reg.description).toBeTruthy();
      // The formats are the contract's, as protocol has it (tests/unit/sandbox-contract.test.ts).
      expect(reg.request_format).toEqual(formatsOf(id as SandboxFunctionId).request_format);
      expect(reg.response_format).toEqual(formatsOf(id as SandboxFunctionId).response_format);
      expect(reg.request_format?.type).toBe("object");
      expect(reg.response_format?.type).toBe("object");
    }
  });

  test("a session: create, exec, files, list, destroy — results match response_format", async () => {
    const created = await client.call("sandbox::create", { env: { GREETING: "hi" } });
    expect(answers("sandbox::create", created)).toBe(true);
    expect(created.backend).toBe("microvm-tcg");
    const id = created.sandbox_id;

    const ran = await client.call("sandbox::exec", { sandbox_id: id, command: "printf '%s|%s\\n' \"$GREETING\"", args: ["a b"] });
    expect(answers("sandbox::exec", ran)).toBe(true);
    expect(ran).toMatchObject({ exit_code: 0, stdout: "hi|a b\n", stderr: "", timed_out: false });

    const wrote = await client.call("sandbox::write_file", { sandbox_id: id, path: "x/y.txt", content: "data" });
    expect(answers("sandbox::write_file", wrote)).toBe(true);
    const read = await client.call("sandbox::read_file", { sandbox_id: id, path: "/root/x/y.txt" });
    expect(answers("sandbox::read_file", read)).toBe(true);
    expect(read).toMatchObject({ content: "data", encoding: "utf8", bytes: 4 });

    const listed = await client.call("sandbox::list", {});
    expect(answers("sandbox::list", listed)).toBe(true);
    expect(listed.sandboxes.map((s: { sandbox_id: string }) => s.sandbox_id)).toContain(id);

    const info = await client.call("sandbox::info", {});
    expect(info).toMatchObject({ backend: "microvm-tcg", backend_reason: "test", pool: { size: 0 } });
    expect(info.limits.output_limit_bytes).toBeGreaterThan(0);

    expect(await client.call("sandbox::destroy", { sandbox_id: id })).toEqual({ sandbox_id: id, destroyed: true });
    const gone = await errorOf(client.call("sandbox::exec", { sandbox_id: id, command: "true" }));
    expect(gone.code).toBe("sandbox_not_found");
    expect(gone.message).toMatch(/sbx_/);
  });

  test("requests that break request_format fail with invalid_argument", async () => {
    const bad: [string, unknown][] = [
      ["sandbox::create", { memory_mb: "lots" }],
      ["sandbox::create", { unknown_field: 1 }],
      ["sandbox::exec", { sandbox_id: "sbx_x" }],
      ["sandbox::exec", { sandbox_id: "sbx_x", command: "true", args: [1] }],
      ["sandbox::exec", { sandbox_id: "sbx_x", command: "true", stream: true }],
      ["sandbox::write_file", { sandbox_id: "sbx_x", path: "", content: "" }],
      ["sandbox::read_file", { sandbox_id: "sbx_x", path: "/x", encoding: "hex" }],
    ];
    for (const [id, payload] of bad) {
      const e = await errorOf(client.call(id, payload));
      expect({ id, code: e.code }).toEqual({ id, code: "invalid_argument" });
      expect(e.message).toMatch(/^request/);
    }
  });

  test("stream: true sends ordered chunks to on_output_function_id as void triggers", async () => {
    const { sandbox_id } = await client.call("sandbox::create", {});
    client.triggers.length = 0;
    const r = await client.call("sandbox::exec", {
      sandbox_id,
      command: "for i in 1 2 3; do echo $i; sleep 0.3; done",
      stream: true,
      on_output_function_id: "agent::on_output",
    });
    expect(r.exec_id).toMatch(/^exe_/);
    expect(client.triggers.length).toBeGreaterThanOrEqual(2);
    for (const [i, t] of client.triggers.entries()) {
      expect(t).toMatchObject({ function_id: "agent::on_output", action: { type: "void" } });
      expect(t.payload).toMatchObject({ sandbox_id, exec_id: r.exec_id, seq: i, stream: "stdout" });
    }
    expect(client.triggers.map((t) => (t.payload as { data: string }).data).join("")).toBe("1\n2\n3\n");
    await client.call("sandbox::stop", { sandbox_id });
  });
});
