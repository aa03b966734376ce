// Chooses the backend once, at start-up: a test boot decides between KVM and TCG, and bubblewrap
// is used only where QEMU is missing. `/dev/kvm` alone proves nothing: nested or paravirtualised
// hosts (PVM) expose it without VT-x/AMD-V and then crawl or abort, so the CPU flags are checked
// and a real boot must answer before KVM is chosen.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createMicrovmBackend } from "./backends/microvm.ts";
import { BWRAP_USR_ROOT, createProcessBackend } from "./backends/process.ts";
import type { BackendKind, SandboxBackend } from "./backends/types.ts";
import { ensureGuest, ensureWorkerGuest } from "./guest.ts";

/** Deadline for the KVM test boot. Real KVM answers in well under a second. */
const KVM_PROBE_TIMEOUT_MS = 10_000;

export function which(bin: string): string | undefined {
  for (const d of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    const p = path.join(d || ".", bin);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Why KVM cannot be used, or undefined when it is worth a test boot. */
export function kvmObstacle(): string | undefined {
  try {
    fs.accessSync("/dev/kvm", fs.constants.R_OK | fs.constants.W_OK);
  } catch {
    return "/dev/kvm is missing or not read-write";
  }
  let flags = "";
  try {
    flags = fs.readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m)?.[1] ?? "";
  } catch {
    // no cpuinfo: treat as no flags
  }
  if (!/\b(vmx|svm)\b/.test(flags)) return "the CPU has no vmx/svm flag (nested or paravirtualised KVM)";
  return undefined;
}

export function bwrapWorks(bwrap = "bwrap"): boolean {
  const r = spawnSync(bwrap, ["--unshare-all", "--die-with-parent", ...BWRAP_USR_ROOT, "--", "/bin/true"], { timeout: 10_000 });
  return r.status === 0;
}

export interface ProbeOptions {
  stateDir: string;
  guestDir?: string;
  /** Skip the probe and use this backend. */
  force?: BackendKind;
  log?: (msg: string) => void;
}

export interface ProbeResult {
  backend: SandboxBackend;
  reason: string;
}

export async function chooseBackend(opts: ProbeOptions): Promise<ProbeResult> {
  const log = opts.log ?? (() => {});
  const qemu = which("qemu-system-x86_64");
  if (opts.force === "process" || (!qemu && !opts.force)) {
    if (!which("bwrap") || !bwrapWorks()) throw new Error("no sandbox backend: qemu-system-x86_64 is missing and bubblewrap does not work");
    return { backend: createProcessBackend({ stateDir: opts.stateDir }), reason: qemu ? "forced" : "qemu-system-x86_64 not found" };
  }
  if (!qemu) throw new Error(`backend ${opts.force} needs qemu-system-x86_64, which is not installed`);
  const guest = await ensureGuest(opts.guestDir, log);
  const tcg = createMicrovmBackend({ accel: "tcg", stateDir: opts.stateDir, ...guest });
  if (opts.force === "microvm-tcg") return { backend: tcg, reason: "forced" };
  const kvm = createMicrovmBackend({ accel: "kvm", stateDir: opts.stateDir, bootTimeoutMs: KVM_PROBE_TIMEOUT_MS, ...guest });
  if (opts.force === "microvm-kvm")
    return { backend: createMicrovmBackend({ accel: "kvm", stateDir: opts.stateDir, ...guest }), reason: "forced" };
  const obstacle = kvmObstacle();
  if (obstacle) return { backend: tcg, reason: obstacle };
  try {
    const vm = await kvm.boot({ memoryMb: 128, vcpus: 1, diskMb: 16 });
    try {
      const r = await vm.exec({ script: "echo ok", timeoutMs: 5_000, outputLimit: 64 });
      if (r.stdout.toString().trim() !== "ok") throw new Error(`unexpected answer ${JSON.stringify(r.stdout.toString())}`);
    } finally {
      await vm.destroy();
    }
    return { backend: createMicrovmBackend({ accel: "kvm", stateDir: opts.stateDir, ...guest }), reason: "a KVM test boot answered" };
  } catch (e) {
    return { backend: tcg, reason: `the KVM test boot failed (${e instanceof Error ? e.message : String(e)})` };
  }
}

/** The backend of worker VMs (sandbox::spawn_worker): the same QEMU accelerator as the chosen
 * backend, booting the worker image (Node and iii-sdk in the initramfs) with an engine port.
 * Undefined on the process backend: sandbox workers need a VM (see README, "Sandbox workers"). */
export async function workerBackendFor(
  kind: BackendKind,
  opts: { stateDir: string; guestDir?: string; log?: (m: string) => void },
): Promise<SandboxBackend | undefined> {
  if (kind === "process") return undefined;
  const guest = await ensureWorkerGuest(opts.guestDir, opts.log);
  return createMicrovmBackend({ accel: kind === "microvm-kvm" ? "kvm" : "tcg", stateDir: opts.stateDir, enginePort: true, ...guest });
}
