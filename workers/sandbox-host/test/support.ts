// Shared by the sandbox-host tests: which backends this machine can run, and why one is skipped.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createMicrovmBackend } from "../src/backends/microvm.ts";
import { createProcessBackend } from "../src/backends/process.ts";
import type { SandboxBackend } from "../src/backends/types.ts";
import { DEFAULT_GUEST_DIR } from "../src/guest.ts";
import { bwrapWorks, kvmObstacle, which } from "../src/probe.ts";

export const qemuMissing: string | false = which("qemu-system-x86_64") ? false : "qemu-system-x86_64 not installed";
export const bwrapMissing: string | false = which("bwrap") && bwrapWorks() ? false : "bubblewrap (bwrap) not installed or not usable";
/** KVM is only tried where the probe would try it; here (no vmx/svm) the TCG suite covers the VM path. */
export const kvmMissing: string | false = qemuMissing || kvmObstacle() || false;

if (qemuMissing) console.warn(`[sandbox tests] skipping microVM tests: ${qemuMissing}`);

export function testStateDir(name: string): string {
  return fs.mkdtempSync(path.join(process.env.SBX_TEST_ROOT ?? os.tmpdir(), `sbx-test-${name}-`));
}

export function tcgBackend(stateDir: string = testStateDir("tcg")): SandboxBackend {
  return createMicrovmBackend({
    accel: "tcg",
    stateDir,
    kernel: path.join(DEFAULT_GUEST_DIR, "vmlinux"),
    initrd: path.join(DEFAULT_GUEST_DIR, "initrd.gz"),
  });
}

export function kvmBackend(stateDir: string = testStateDir("kvm")): SandboxBackend {
  return createMicrovmBackend({
    accel: "kvm",
    stateDir,
    kernel: path.join(DEFAULT_GUEST_DIR, "vmlinux"),
    initrd: path.join(DEFAULT_GUEST_DIR, "initrd.gz"),
  });
}

export function processBackend(stateDir: string = testStateDir("proc")): SandboxBackend {
  return createProcessBackend({ stateDir });
}

export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    // A zombie still answers kill(0); it is dead for our purposes.
    return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Poll `cond` (it may be async: a call to the host) every `everyMs` until it holds or the time is up. */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 5_000, everyMs = 25): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return cond();
}

/** Resolve to the SandboxError code a promise rejects with (or "resolved"). */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "resolved";
  } catch (e) {
    return (e as { code?: string }).code ?? "no-code";
  }
}

/** The sandbox host's CLI (`npm run sandbox-host`). */
export const hostMain = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "main.ts");

/** The host retries the engine every second (not up to every 30 s, iii-sdk's backoff): it is
 * started before the engine answers, and the restart case waits for it to come back. */
const RECONNECT_FAST = ["--reconnect-max-ms", "1000"];
/** What an engine start failed of when another process took its port first. */
const PORT_TAKEN = /EADDRINUSE|[Aa]ddress already in use|port taken/;
/** Fresh ports tried when the one picked was taken before the engine bound it. */
const PORT_ATTEMPTS = 4;

/**
 * An engine (`startOn(port)`, `npm start`'s) and a sandbox host process (`src/main.ts --engine …
 * ...hostArgs`) started together: the host is spawned first, on the port the engine is about to
 * take, so its warm pool boots while the engine starts instead of after it. The host connects by
 * itself once the engine answers (within a second: RECONNECT_FAST), as after an engine restart.
 * If another process took the port before the engine bound it, both are stopped and started again
 * on a fresh one. The host's stderr is in `log()`.
 */
export async function startEngineAndHost<E extends { wsUrl: string }>(opts: {
  startOn: (port: number) => Promise<E>;
  freePort: () => Promise<number>;
  hostArgs: string[];
  env?: NodeJS.ProcessEnv;
}): Promise<{ engine: E; host: ChildProcess; log: () => string }> {
  for (let attempt = 1; ; attempt++) {
    const port = await opts.freePort();
    let log = "";
    const host = spawn(process.execPath, [hostMain, "--engine", `ws://127.0.0.1:${port}`, ...RECONNECT_FAST, ...opts.hostArgs], {
      stdio: ["ignore", "ignore", "pipe"],
      env: opts.env ?? process.env,
    });
    host.stderr?.on("data", (d: Buffer) => {
      log += d.toString();
    });
    try {
      return { engine: await opts.startOn(port), host, log: () => log };
    } catch (e) {
      await stopHost(host);
      if (attempt >= PORT_ATTEMPTS || !PORT_TAKEN.test(String(e))) throw e;
    }
  }
}

/** Stop a sandbox host process started by a test, and wait until it has exited. */
export async function stopHost(host: ChildProcess | undefined): Promise<void> {
  if (!host || host.exitCode !== null || host.signalCode !== null) return;
  const exited = new Promise((r) => host.once("exit", r));
  host.kill("SIGTERM");
  await exited;
}

/**
 * A call through `client` that retries while the function is not registered yet (the host
 * registers `sandbox::*` asynchronously after connecting): every 200 ms, `attempts` times. Only
 * `function_not_found` is retried, and only for the ids `retryable` accepts.
 */
export function retryingCall(
  client: { trigger(req: { function_id: string; payload: unknown; timeoutMs?: number }): Promise<unknown> },
  opts: { timeoutMs: number; attempts: number; retryable?: (functionId: string) => boolean },
) {
  // biome-ignore lint/suspicious/noExplicitAny: results read loosely by the tests, each checked by an expect
  return async (function_id: string, payload: unknown, timeoutMs = opts.timeoutMs): Promise<any> => {
    for (let i = 0; ; i++) {
      try {
        return await client.trigger({ function_id, payload, timeoutMs });
      } catch (e) {
        if (i > opts.attempts || (e as { code?: string }).code !== "function_not_found" || !(opts.retryable?.(function_id) ?? true))
          throw e;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };
}
