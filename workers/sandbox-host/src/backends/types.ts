// The contract every sandbox backend implements: boot an isolated machine, then run scripts and
// move files in it. The registry (sandboxes.ts) adds ids, limits, pooling and lifecycle on top.
import type { Socket } from "node:net";

export type BackendKind = "microvm-kvm" | "microvm-tcg" | "process";

export interface BootOptions {
  memoryMb: number;
  vcpus: number;
  /** Size of each of the guest's /tmp and /root. */
  diskMb: number;
}

export type OutputStream = "stdout" | "stderr";

export interface ExecRequest {
  /** A /bin/sh script (see command.ts); runs with /root as its working directory. */
  script: string;
  stdin?: Uint8Array;
  timeoutMs: number;
  /** Bytes kept per stream; the backend returns at most limit + 1 so truncation is detectable. */
  outputLimit: number;
  /** When set, output is also delivered in chunks while the command runs. */
  onOutput?: (stream: OutputStream, chunk: Buffer) => void;
}

export interface ExecOutcome {
  /** The command's exit status (128 + n when killed by signal n). */
  exitCode: number;
  /** The deadline fired and the command's process group was killed. */
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
}

export interface ExitInfo {
  /** Why the machine went away, for the guest_crashed message. */
  reason: string;
  /** True when destroy() caused it. */
  requested: boolean;
}

export interface SandboxMachine {
  /** Host pid of the VM (QEMU) when there is one long-lived process. */
  readonly pid: number | undefined;
  exec(req: ExecRequest): Promise<ExecOutcome>;
  /** mode: permission bits, e.g. 0o755; omitted keeps the default. */
  writeFile(path: string, data: Uint8Array, mode?: number): Promise<void>;
  /** Throws limit_exceeded when the file is larger than `limit`. */
  readFile(path: string, limit: number): Promise<Buffer>;
  /** Kill the machine and remove its host state. Idempotent. */
  destroy(): Promise<void>;
  /** Settles once, when the machine is gone for any reason. */
  readonly exited: Promise<ExitInfo>;
  /** Worker machines only: the host end of the guest runtime's channel (paused, right after its
   * hello) and what the hello said. The stream is the mux of guest/worker/runtime.mjs. */
  readonly engine?: { socket: Socket; hello: Record<string, unknown> };
}

export interface SandboxBackend {
  readonly kind: BackendKind;
  boot(opts: BootOptions): Promise<SandboxMachine>;
  /** Kill machines a previous, crashed host process left behind. Returns how many were killed. */
  cleanupOrphans(): Promise<number>;
}
