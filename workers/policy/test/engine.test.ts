// policy::check_permissions against the engine core served in-process (tests/support/node-engine.ts), the Node worker run alone over its
// watched file (what `npm run worker -- policy` runs).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { eventually, until } from "@iii-edge/test-support/wait";
import { CHECK_PERMISSIONS, worker } from "../src/node.ts";

let engine: NodeEngine;
let policy: RunningWorkers;
let caller: RunningWorkers;
let file: string;

const check = (payload: unknown) => caller.client.trigger<unknown, unknown>({ function_id: CHECK_PERMISSIONS, payload });

beforeAll(async () => {
  file = path.join(mkdtempSync(path.join(tmpdir(), "iii-policy-e2e-")), "iii-permissions.yaml");
  writeFileSync(
    file,
    "version: 1\nrules:\n  - '!files::delete'\n  - rule_id: tmp-writes\n    function: shell::fs::write\n    action: allow\n    args:\n      path: { matches: '^/tmp/' }\n",
  );
  engine = await startNodeEngine();
  policy = runWorkers(engine.wsUrl, [worker as WorkerModule<never>], { env: { III_PERMISSIONS_PATH: file } });
  caller = runWorkers(engine.wsUrl, [], { workerName: "policy-test-caller" });
  await until(() => check({ function_id: "x" }), "policy::check_permissions registered");
});

afterAll(async () => {
  await caller?.shutdown();
  await policy?.shutdown();
  await engine?.stop();
});

describe("policy::check_permissions through the engine", () => {
  it("answers allow, deny and needs_approval from the file", async () => {
    expect(await check({ function_id: "files::delete", args: { path: "/" } })).toEqual({
      decision: "deny",
      rule_id: "files::delete",
      rule_action: "deny",
    });
    // A state write is the kernel's: refused before the file is read (the file has no rule for it).
    expect(await check({ function_id: "state::set", args: { scope: "approvals" } })).toMatchObject({ decision: "deny", rule_id: "kernel" });
    expect(await check({ function_id: "shell::fs::write", args: { path: "/tmp/a" } })).toEqual({
      decision: "allow",
      rule_id: "tmp-writes",
    });
    expect(await check({ function_id: "shell::fs::write", args: { path: "/etc/a" } })).toEqual({ decision: "needs_approval" });
    expect(await check({ function_id: "shell::fs::write" })).toEqual({ decision: "needs_approval" });
  });

  it("bad input is invalid_arguments", async () => {
    await expect(check({ args: {} })).rejects.toMatchObject({ code: "invalid_arguments" });
    await expect(check({ function_id: "" })).rejects.toMatchObject({ code: "invalid_arguments" });
  });

  it("an edit of the file applies to the next checks; a broken edit does not open the gate", async () => {
    writeFileSync(file, "version: 1\nrules:\n  - files::delete\n  - state::set\n");
    await eventually(
      async () => ((await check({ function_id: "files::delete" })) as { decision: string }).decision === "allow",
      10_000,
      "the edited rules",
    );
    // An allow rule for a kernel function changes nothing.
    expect(await check({ function_id: "state::set" })).toMatchObject({ decision: "deny", rule_id: "kernel" });
    const warn = vi.spyOn(console, "warn");
    try {
      writeFileSync(file, "version: 1\nrules:\n  - !files::delete\n  - '*'\n");
      // The worker says it refused the file (one line) …
      await eventually(
        () => warn.mock.calls.some(([line]) => String(line).includes("keeping the rules in force")),
        10_000,
        "the refusal in the log",
      );
    } finally {
      warn.mockRestore();
    }
    // … and the broken file never takes effect: its '*' would allow anything.
    expect(await check({ function_id: "shell::exec" })).toEqual({ decision: "needs_approval" });
    expect(await check({ function_id: "files::delete" })).toEqual({ decision: "allow", rule_id: "files::delete" });
  });
});
