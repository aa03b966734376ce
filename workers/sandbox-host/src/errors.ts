// The closed set of error codes a sandbox function can fail with. Every failure crosses the engine
// boundary as a SandboxError whose `code` sdk-edge's client puts on the wire as the error code, so
// iii-sdk and sdk-edge callers alike see `sandbox_not_found`, `exec_timeout`, … as the code.

export type SandboxErrorCode =
  | "invalid_argument" // the request does not match the function's request_format
  | "sandbox_not_found" // no such sandbox (never existed, destroyed, or reaped when idle)
  | "limit_exceeded" // a host cap (memory, vCPUs, sandboxes, queue, file size) would be exceeded
  | "exec_timeout" // the guest did not answer at all by the deadline; the VM was killed
  | "guest_crashed" // the VM exited unexpectedly (panic, poweroff, QEMU died); it was cleaned up
  | "boot_failed" // the VM did not boot or its agent never became ready
  | "file_error" // write_file/read_file failed in the guest (no such file, is a directory, …)
  | "network_unavailable" // network was requested; sandboxes never get one
  | "host_shutting_down" // the host is stopping and takes no new work
  | "worker_crashed" // a sandbox worker's process exited; its VM was stopped (never restarted)
  | "worker_not_ready" // a sandbox worker did not register its functions in time; its VM was stopped
  | "internal_error"; // anything else (a bug): the message says what

export class SandboxError extends Error {
  readonly code: SandboxErrorCode;
  readonly details?: Record<string, unknown>;

  constructor(code: SandboxErrorCode, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SandboxError";
    this.code = code;
    this.details = options?.details;
  }

  toJSON(): { code: SandboxErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

/** Normalise any thrown value once, at the boundary, keeping it as the cause. */
export function toSandboxError(err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new SandboxError("internal_error", message, { cause: err });
}
