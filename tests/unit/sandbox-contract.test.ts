// The sandbox host serves protocol's sandbox contract (protocol/src/harness/sandbox.ts), one copy:
// it publishes the contract's JSON Schema (with its own defaults and caps added to the descriptions
// only) and judges each request by it — accepted, or refused with invalid_argument naming the
// field. Each answer the host documents parses under the contract. (That it registers every
// function with these formats: workers/sandbox-host/test/functions.test.ts.)
import { requestFormat, responseFormat } from "@iii-edge/protocol";
import { type SandboxFunctionId, sandboxContracts } from "@iii-edge/protocol/harness";
import { formatsOf, parseRequest } from "@iii-edge/sandbox-host/contract";
import { describe, expect, it } from "vitest";

/** A JSON Schema without its descriptions: what it accepts, not how it is explained. */
function rules(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rules);
  if (schema === null || typeof schema !== "object") return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([k]) => k !== "description")
      .map(([k, v]) => [k, rules(v)]),
  );
}

/** The host's verdict on a request: undefined when accepted, else the refusal's code and message. */
function verdict(fn: SandboxFunctionId, payload: unknown): { code: string; message: string } | undefined {
  try {
    parseRequest(fn, payload);
    return undefined;
  } catch (e) {
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
}

const id = "sbx_0123456789abcdef";
const requests: Record<SandboxFunctionId, { ok: unknown[]; bad: unknown[] }> = {
  "sandbox::create": {
    ok: [{}, { image: "busybox", memory_mb: 256, vcpus: 1, disk_mb: 64, timeout_s: 300, env: { A: "1" }, network: false }],
    bad: [
      { image: "ubuntu" },
      { memory_mb: 0 },
      { memory_mb: 1.5 },
      { timeout_s: 24 * 3600 + 1 },
      { env: { A: 1 } },
      { network: "no" },
      { gpu: true },
      [],
      "create",
    ],
  },
  "sandbox::exec": {
    ok: [
      { sandbox_id: id, command: "echo hi" },
      {
        sandbox_id: id,
        command: "cat",
        args: ["a", "b"],
        stdin: "aGk=",
        stdin_encoding: "base64",
        cwd: "/tmp",
        env: { X: "y" },
        timeout_ms: 1000,
        stream: true,
        on_output_function_id: "me::chunk",
        output_channel: { channel_id: "c", access_key: "k", direction: "write" },
      },
    ],
    bad: [
      { sandbox_id: id },
      { command: "echo" },
      { sandbox_id: "", command: "echo" },
      { sandbox_id: "x".repeat(65), command: "echo" },
      { sandbox_id: id, command: "" },
      { sandbox_id: id, command: "echo", args: [1] },
      { sandbox_id: id, command: "echo", stdin_encoding: "hex" },
      { sandbox_id: id, command: "echo", timeout_ms: 0 },
      { sandbox_id: id, command: "echo", output_channel: { channel_id: "c", access_key: "k", direction: "read" } },
      { sandbox_id: id, command: "echo", output_channel: { channel_id: "c", direction: "write" } },
      { sandbox_id: id, command: "echo", shell: "bash" },
    ],
  },
  "sandbox::write_file": {
    ok: [
      { sandbox_id: id, path: "a.txt", content: "" },
      { sandbox_id: id, path: "/root/b", content: "aGk=", encoding: "base64", mode: 0o755 },
    ],
    bad: [
      { sandbox_id: id, path: "a.txt" },
      { sandbox_id: id, path: "", content: "x" },
      { sandbox_id: id, path: "p".repeat(4097), content: "x" },
      { sandbox_id: id, path: "a", content: "x", mode: 0o10000 },
      { sandbox_id: id, path: "a", content: "x", mode: -1 },
      { sandbox_id: id, path: "a", content: "x", owner: "root" },
    ],
  },
  "sandbox::read_file": {
    ok: [
      { sandbox_id: id, path: "a.txt" },
      { sandbox_id: id, path: "a.bin", encoding: "base64" },
    ],
    bad: [{ sandbox_id: id }, { path: "a" }, { sandbox_id: id, path: "a", encoding: "latin1" }, { sandbox_id: id, path: "a", offset: 3 }],
  },
  "sandbox::list": { ok: [{}], bad: [{ all: true }, null] },
  "sandbox::stop": { ok: [{ sandbox_id: id }], bad: [{}, { sandbox_id: "" }, { sandbox_id: id, force: true }] },
  "sandbox::destroy": { ok: [{ sandbox_id: id }], bad: [{}, { sandbox_id: 7 }] },
  "sandbox::spawn_worker": {
    ok: [
      { source: "export {}" },
      {
        files: { "worker.mjs": "export {}" },
        entry: "worker.mjs",
        env: { A: "b" },
        register_prefix: "mine::",
        idle_timeout_s: 60,
        timeout_s: 600,
        memory_mb: 512,
        vcpus: 1,
        allow_call: ["state::*"],
        allow_bind: ["http"],
        wait_for: ["mine::hello"],
      },
    ],
    bad: [
      { source: "" },
      { register_prefix: "a:" },
      { timeout_s: 24 * 3600 + 1 },
      { idle_timeout_s: 0 },
      { files: { "a.mjs": 1 } },
      { allow_call: Array.from({ length: 65 }, () => "x") },
      { allow_bind: [""] },
      { image: "busybox" },
    ],
  },
  "sandbox::stop_worker": { ok: [{ sandbox_id: "sbw_1" }], bad: [{}, { sandbox_id: "sbw_1", now: true }] },
  "sandbox::info": { ok: [{}], bad: [{ verbose: true }] },
};

/** Answers as the host documents them (its README and the functions' descriptions). */
const responses: Record<SandboxFunctionId, unknown[]> = {
  "sandbox::create": [
    { sandbox_id: id, backend: "microvm-tcg", from_pool: false, boot_ms: 2100, memory_mb: 256, vcpus: 1, disk_mb: 64, timeout_s: 300 },
  ],
  "sandbox::exec": [
    { exit_code: 0, stdout: "hi\n", stderr: "", duration_ms: 12, timed_out: false },
    { exit_code: 124, stdout: "", stderr: "", duration_ms: 1000, timed_out: true, truncated: { stdout: true }, exec_id: "ex_1" },
  ],
  "sandbox::write_file": [{ path: "/root/a.txt", bytes: 3 }],
  "sandbox::read_file": [{ path: "/root/a.txt", content: "abc", encoding: "utf8", bytes: 3 }],
  "sandbox::list": [
    { sandboxes: [] },
    {
      sandboxes: [
        { sandbox_id: id, backend: "process", busy: false, created_at: "2026-12-07T00:00:00Z", kind: "command" },
        { sandbox_id: "sbw_1", kind: "worker", register_prefix: "mine::", functions: [{ function_id: "mine::hello" }], refused: [] },
      ],
    },
  ],
  "sandbox::stop": [{ sandbox_id: id, destroyed: true }],
  "sandbox::destroy": [{ sandbox_id: id, destroyed: false }],
  "sandbox::spawn_worker": [
    { sandbox_id: "sbw_1", register_prefix: "sbw_1::", functions: [{ function_id: "sbw_1::hello" }], auth: "token" },
  ],
  "sandbox::stop_worker": [{ sandbox_id: "sbw_1", destroyed: true }],
  "sandbox::info": [{ backend: "process", backend_reason: "no kvm", limits: { max_sandboxes: 32 }, pool: { size: 1 } }],
};

describe("the sandbox host serves protocol's sandbox contract", () => {
  it("every function the tests cover is a function of the contract, and each is covered", () => {
    expect(Object.keys(requests).sort()).toEqual(Object.keys(sandboxContracts).sort());
    expect(Object.keys(responses).sort()).toEqual(Object.keys(sandboxContracts).sort());
  });

  for (const fn of Object.keys(sandboxContracts) as SandboxFunctionId[]) {
    it(`${fn}: publishes the contract's schemas (the host's notes in descriptions only)`, () => {
      const p = formatsOf(fn);
      expect(rules(p.request_format)).toEqual(rules(requestFormat(sandboxContracts[fn].request)));
      expect(rules(p.response_format)).toEqual(rules(responseFormat(sandboxContracts[fn].response)));
      expect((p.request_format as { type?: string }).type).toBe("object");
    });

    it(`${fn}: the host accepts and refuses requests as the contract does`, () => {
      const { ok, bad } = requests[fn];
      for (const payload of ok) {
        expect(verdict(fn, payload), JSON.stringify(payload)).toBeUndefined();
        expect(sandboxContracts[fn].request.safeParse(payload).success, JSON.stringify(payload)).toBe(true);
      }
      for (const payload of bad) {
        const refused = verdict(fn, payload);
        expect(refused, JSON.stringify(payload)).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(/^request/) });
        expect(sandboxContracts[fn].request.safeParse(payload).success, JSON.stringify(payload)).toBe(false);
      }
    });

    it(`${fn}: an answer the host documents is one the contract reads`, () => {
      for (const answer of responses[fn]) {
        expect(sandboxContracts[fn].response.safeParse(answer).success, JSON.stringify(answer)).toBe(true);
      }
    });
  }

  it("the host's defaults and caps are in the published descriptions", () => {
    const create = formatsOf("sandbox::create").request_format as { properties: Record<string, { description: string }> };
    expect(create.properties.memory_mb!.description).toMatch(/Default \d+, at least \d+/);
  });
});
