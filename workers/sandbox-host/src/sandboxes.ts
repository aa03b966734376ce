// The sandbox registry: ids, limits, the warm pool, the cap on concurrent boots, the idle reaper
// and one-request-at-a-time per sandbox. Plain TypeScript over a SandboxBackend; it knows nothing
// about the engine (functions.ts maps it onto `sandbox::*`).
import { randomBytes } from "node:crypto";
import { SANDBOX_IMAGE } from "@iii-edge/protocol/harness";
import type { BackendKind, BootOptions, ExecOutcome, SandboxBackend, SandboxMachine } from "./backends/types.ts";
import { buildScript, checkEnv } from "./command.ts";
import { SandboxError, type SandboxErrorCode } from "./errors.ts";
import {
  COMMAND_LIMIT_BYTES,
  DEFAULT_DISK_MB,
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_S,
  DEFAULT_MAX_CONCURRENT_BOOTS,
  DEFAULT_MAX_MEMORY_MB,
  DEFAULT_MAX_SANDBOXES,
  GUEST_RESERVED_MB,
  DEFAULT_MEMORY_MB,
  DEFAULT_POOL_SIZE,
  DEFAULT_VCPUS,
  FILE_LIMIT_BYTES,
  MAX_DISK_MB,
  MAX_ENV_VARS,
  MAX_EXEC_TIMEOUT_MS,
  MAX_QUEUED_PER_SANDBOX,
  MIN_DISK_MB,
  MIN_MEMORY_MB,
  OUTPUT_LIMIT_BYTES,
  RESULT_JSON_BUDGET_BYTES,
  STDIN_LIMIT_BYTES,
  TOMBSTONES_KEPT,
} from "./limits.ts";
import os from "node:os";

export type Encoding = "utf8" | "base64";

export interface CreateRequest {
  image?: string;
  memory_mb?: number;
  vcpus?: number;
  disk_mb?: number;
  timeout_s?: number;
  env?: Record<string, string>;
  network?: boolean;
}
export interface CreateResult {
  sandbox_id: string;
  backend: BackendKind;
  from_pool: boolean;
  boot_ms: number;
  memory_mb: number;
  vcpus: number;
  disk_mb: number;
  timeout_s: number;
}
export interface ExecRequest {
  sandbox_id: string;
  command: string;
  args?: string[];
  stdin?: string;
  stdin_encoding?: Encoding;
  cwd?: string;
  env?: Record<string, string>;
  timeout_ms?: number;
  stream?: boolean;
  on_output_function_id?: string;
  /** A channel's writer ref; functions.ts streams output chunks into it (the registry ignores it). */
  output_channel?: { channel_id: string; access_key: string; direction: "write" };
}
export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  duration_ms: number;
  timed_out: boolean;
  truncated?: { stdout?: true; stderr?: true };
  exec_id?: string;
}
export interface OutputChunk {
  sandbox_id: string;
  exec_id: string;
  stream: "stdout" | "stderr";
  data: string;
}
export interface WriteFileRequest {
  sandbox_id: string;
  path: string;
  content: string;
  encoding?: Encoding;
  mode?: number;
}
export interface ReadFileRequest {
  sandbox_id: string;
  path: string;
  encoding?: Encoding;
}
export interface SandboxSummary {
  sandbox_id: string;
  backend: BackendKind;
  busy: boolean;
  created_at: string;
  last_used_at: string;
  memory_mb: number;
  vcpus: number;
  disk_mb: number;
  timeout_s: number;
}

export interface HostLimits {
  max_memory_mb: number;
  max_vcpus: number;
  max_disk_mb: number;
  max_sandboxes: number;
  max_exec_timeout_ms: number;
  output_limit_bytes: number;
  file_limit_bytes: number;
  stdin_limit_bytes: number;
}

export interface SandboxesOptions {
  backend: SandboxBackend;
  poolSize?: number;
  maxConcurrentBoots?: number;
  maxSandboxes?: number;
  maxMemoryMb?: number;
  maxVcpus?: number;
  defaultIdleTimeoutS?: number;
  /** Sizes of a default sandbox, the ones the warm pool boots (worker VMs need more RAM). */
  defaultBoot?: BootOptions;
  /** Share another registry's boot gate instead of a new one of maxConcurrentBoots. */
  bootGate?: BootGate;
  /** false: create() does not refill the pool; the caller calls refill() once the new sandbox is
   * up, so the refill boot does not compete for the CPU with it (worker start-up is CPU-bound). */
  refillOnCreate?: boolean;
  /** Injected for tests. */
  now?: () => number;
  newId?: () => string;
  log?: (msg: string) => void;
}

/** The only image: the busybox initramfs built by guest/build-guest.sh. */
/** The one guest image (the contract's). */
export const DEFAULT_IMAGE = SANDBOX_IMAGE;
/** Exit code reported for a command killed at its deadline, as coreutils `timeout` does. */
export const TIMEOUT_EXIT_CODE = 124;

interface Record_ {
  id: string;
  machine: SandboxMachine;
  env: Record<string, string>;
  boot: BootOptions;
  idleTimeoutS: number;
  createdAt: number;
  lastUsedAt: number;
  queue: Promise<unknown>;
  pending: number;
  idleTimer: ReturnType<typeof setTimeout> | undefined;
  gone: boolean;
}

/** Limits concurrent boots; creates are served before pool refills. One gate can serve several
 * registries (plain and worker sandboxes share the host's cores). */
export class BootGate {
  readonly max: number;
  active = 0;
  peak = 0;
  private urgent: (() => void)[] = [];
  private background: (() => void)[] = [];

  constructor(max: number) {
    this.max = max;
  }

  async run<T>(fn: () => Promise<T>, urgent: boolean): Promise<T> {
    if (this.active >= this.max) {
      await new Promise<void>((resolve) => (urgent ? this.urgent : this.background).push(resolve));
    } else {
      this.active++;
    }
    this.peak = Math.max(this.peak, this.active);
    try {
      return await fn();
    } finally {
      const next = this.urgent.shift() ?? this.background.shift();
      if (next)
        next(); // the slot passes straight to the next waiter
      else this.active--;
    }
  }

  get waiting(): number {
    return this.urgent.length + this.background.length;
  }
}

function decode(content: string, encoding: Encoding | undefined, field: string): Buffer {
  if (encoding === "base64") {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(content.replace(/\s+/g, "")))
      throw new SandboxError("invalid_argument", `${field}: not valid base64`);
    return Buffer.from(content, "base64");
  }
  return Buffer.from(content, "utf8");
}

/** Keep at most `limit` bytes, cutting at a UTF-8 character boundary. */
function clip(b: Buffer, limit: number): Buffer {
  if (b.length <= limit) return b;
  let end = limit;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--;
  return b.subarray(0, end);
}

export class Sandboxes {
  readonly backend: SandboxBackend;
  readonly limits: HostLimits;
  readonly poolSize: number;
  private readonly gate: BootGate;
  /** The boot gate, to share with another registry. */
  get bootGate(): BootGate {
    return this.gate;
  }
  private readonly defaultIdleTimeoutS: number;
  private readonly defaultBoot: BootOptions;
  private readonly refillOnCreate: boolean;
  private readonly now: () => number;
  private readonly newId: () => string;
  private readonly log: (msg: string) => void;
  private readonly records = new Map<string, Record_>();
  private readonly tombstones = new Map<string, { code: SandboxErrorCode; message: string }>();
  private readonly pool: SandboxMachine[] = [];
  private readonly claims: ((m: SandboxMachine | undefined) => void)[] = [];
  /** Every machine between boot() and its registration: shutdown must reach these too. */
  private readonly booting = new Set<Promise<SandboxMachine | undefined>>();
  private poolBooting = 0;
  private poolRetry: ReturnType<typeof setTimeout> | undefined;
  private reserved = 0;
  private execCounter = 0;
  private shuttingDown = false;

  constructor(opts: SandboxesOptions) {
    this.backend = opts.backend;
    this.poolSize = opts.poolSize ?? DEFAULT_POOL_SIZE;
    this.gate = opts.bootGate ?? new BootGate(opts.maxConcurrentBoots ?? DEFAULT_MAX_CONCURRENT_BOOTS);
    this.defaultIdleTimeoutS = opts.defaultIdleTimeoutS ?? DEFAULT_IDLE_TIMEOUT_S;
    this.defaultBoot = opts.defaultBoot ?? { memoryMb: DEFAULT_MEMORY_MB, vcpus: DEFAULT_VCPUS, diskMb: DEFAULT_DISK_MB };
    this.refillOnCreate = opts.refillOnCreate ?? true;
    this.now = opts.now ?? Date.now;
    this.newId = opts.newId ?? (() => `sbx_${randomBytes(8).toString("hex")}`);
    this.log = opts.log ?? (() => {});
    this.limits = {
      max_memory_mb: opts.maxMemoryMb ?? DEFAULT_MAX_MEMORY_MB,
      max_vcpus: opts.maxVcpus ?? os.availableParallelism(),
      max_disk_mb: MAX_DISK_MB,
      max_sandboxes: opts.maxSandboxes ?? DEFAULT_MAX_SANDBOXES,
      max_exec_timeout_ms: MAX_EXEC_TIMEOUT_MS,
      output_limit_bytes: OUTPUT_LIMIT_BYTES,
      file_limit_bytes: FILE_LIMIT_BYTES,
      stdin_limit_bytes: STDIN_LIMIT_BYTES,
    };
  }

  /** Kill what a crashed predecessor left behind, then start filling the warm pool. */
  async start(): Promise<{ orphansKilled: number }> {
    const orphansKilled = await this.backend.cleanupOrphans();
    if (orphansKilled) this.log(`killed ${orphansKilled} orphan VM(s) left by a previous host`);
    this.refillPool();
    return { orphansKilled };
  }

  /** Resolves once the pool holds poolSize ready machines (for tests and benchmarks). */
  async poolReady(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pool.length < this.poolSize) {
      if (Date.now() > deadline) throw new Error("pool did not fill in time");
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  get stats(): {
    sandboxes: number;
    pool_ready: number;
    pool_booting: number;
    boots_active: number;
    boots_waiting: number;
    boots_peak: number;
  } {
    return {
      sandboxes: this.records.size,
      pool_ready: this.pool.length,
      pool_booting: this.poolBooting,
      boots_active: this.gate.active,
      boots_waiting: this.gate.waiting,
      boots_peak: this.gate.peak,
    };
  }

  /** Host pids of every live machine (sandboxes and pool), for tests. */
  pids(): number[] {
    return [...this.records.values()]
      .map((r) => r.machine.pid)
      .concat(this.pool.map((m) => m.pid))
      .filter((p): p is number => p !== undefined);
  }

  async create(req: CreateRequest): Promise<CreateResult> {
    this.checkOpen();
    if (req.image !== undefined && req.image !== DEFAULT_IMAGE) {
      throw new SandboxError("invalid_argument", `image ${JSON.stringify(req.image)} does not exist; the only image is "${DEFAULT_IMAGE}"`);
    }
    if (req.network) throw new SandboxError("network_unavailable", "sandboxes have no network: the VM gets no network device");
    const boot: BootOptions = {
      memoryMb: req.memory_mb ?? this.defaultBoot.memoryMb,
      vcpus: req.vcpus ?? this.defaultBoot.vcpus,
      diskMb: req.disk_mb ?? this.defaultBoot.diskMb,
    };
    if (boot.memoryMb < MIN_MEMORY_MB) throw new SandboxError("invalid_argument", `memory_mb must be at least ${MIN_MEMORY_MB}`);
    if (boot.memoryMb > this.limits.max_memory_mb) {
      throw new SandboxError("limit_exceeded", `memory_mb ${boot.memoryMb} is above this host's cap of ${this.limits.max_memory_mb}`);
    }
    if (boot.vcpus > this.limits.max_vcpus) {
      throw new SandboxError("limit_exceeded", `vcpus ${boot.vcpus} is above this host's cap of ${this.limits.max_vcpus}`);
    }
    if (boot.diskMb < MIN_DISK_MB) throw new SandboxError("invalid_argument", `disk_mb must be at least ${MIN_DISK_MB}`);
    if (boot.diskMb > Math.min(MAX_DISK_MB, boot.memoryMb - GUEST_RESERVED_MB)) {
      throw new SandboxError(
        "limit_exceeded",
        `disk_mb ${boot.diskMb} does not fit: the disk is guest RAM, so it may be at most memory_mb - ${GUEST_RESERVED_MB} (${boot.memoryMb - GUEST_RESERVED_MB})`,
      );
    }
    const idleTimeoutS = req.timeout_s ?? this.defaultIdleTimeoutS;
    const env = req.env ?? {};
    checkEnv(env, "env");
    if (Object.keys(env).length > MAX_ENV_VARS) throw new SandboxError("limit_exceeded", `env: at most ${MAX_ENV_VARS} variables`);
    if (this.records.size + this.reserved >= this.limits.max_sandboxes) {
      throw new SandboxError("limit_exceeded", `this host already runs its maximum of ${this.limits.max_sandboxes} sandboxes`);
    }

    this.reserved++;
    const started = this.now();
    let machine: SandboxMachine | undefined;
    let fromPool = false;
    try {
      if (this.isDefault(boot)) {
        machine = this.pool.shift();
        if (!machine && this.poolBooting > this.claims.length) {
          machine = await new Promise<SandboxMachine | undefined>((resolve) => this.claims.push(resolve));
        }
        fromPool = machine !== undefined;
      }
      machine ??= await this.boot(boot, true);
      if (!machine) throw new SandboxError("host_shutting_down", "the host is shutting down");
    } finally {
      this.reserved--;
      if (this.refillOnCreate) this.refillPool();
    }
    if (this.shuttingDown) {
      await machine.destroy();
      throw new SandboxError("host_shutting_down", "the host is shutting down");
    }

    const id = this.newId();
    const now = this.now();
    const rec: Record_ = {
      id,
      machine,
      env,
      boot,
      idleTimeoutS,
      createdAt: now,
      lastUsedAt: now,
      queue: Promise.resolve(),
      pending: 0,
      idleTimer: undefined,
      gone: false,
    };
    this.records.set(id, rec);
    machine.exited.then((e) => {
      if (rec.gone) return;
      this.forget(rec, "guest_crashed", `sandbox ${id} crashed and was removed: ${e.reason}`);
      this.log(`sandbox ${id} crashed: ${e.reason}`);
    });
    this.armIdle(rec);
    return {
      sandbox_id: id,
      backend: this.backend.kind,
      from_pool: fromPool,
      boot_ms: now - started,
      memory_mb: boot.memoryMb,
      vcpus: boot.vcpus,
      disk_mb: boot.diskMb,
      timeout_s: idleTimeoutS,
    };
  }

  async exec(req: ExecRequest, onOutput?: (chunk: OutputChunk) => void): Promise<ExecResult> {
    const timeoutMs = req.timeout_ms ?? DEFAULT_EXEC_TIMEOUT_MS;
    if (timeoutMs > MAX_EXEC_TIMEOUT_MS) throw new SandboxError("limit_exceeded", `timeout_ms is above the cap of ${MAX_EXEC_TIMEOUT_MS}`);
    checkEnv(req.env, "env");
    const stdin = req.stdin === undefined ? undefined : decode(req.stdin, req.stdin_encoding, "stdin");
    if (stdin && stdin.length > STDIN_LIMIT_BYTES)
      throw new SandboxError("limit_exceeded", `stdin is above the cap of ${STDIN_LIMIT_BYTES} bytes`);
    const execId = onOutput ? `exe_${++this.execCounter}_${randomBytes(4).toString("hex")}` : undefined;
    return this.serialised(req.sandbox_id, async (rec) => {
      const script = buildScript({ command: req.command, args: req.args, cwd: req.cwd, env: [rec.env, req.env] });
      if (Buffer.byteLength(script) > COMMAND_LIMIT_BYTES) {
        throw new SandboxError("limit_exceeded", `command, args, cwd and env together exceed ${COMMAND_LIMIT_BYTES} bytes`);
      }
      const started = this.now();
      const outcome = await rec.machine.exec({
        script,
        stdin,
        timeoutMs,
        outputLimit: OUTPUT_LIMIT_BYTES,
        onOutput:
          onOutput && execId
            ? (stream, bytes) => onOutput({ sandbox_id: rec.id, exec_id: execId, stream, data: bytes.toString("utf8") })
            : undefined,
      });
      const result = shapeResult(outcome, this.now() - started);
      if (execId) result.exec_id = execId;
      return result;
    });
  }

  async writeFile(req: WriteFileRequest): Promise<{ path: string; bytes: number }> {
    const data = decode(req.content, req.encoding, "content");
    if (data.length > FILE_LIMIT_BYTES)
      throw new SandboxError("limit_exceeded", `file is ${data.length} bytes; write_file takes at most ${FILE_LIMIT_BYTES}`);
    checkPath(req.path);
    return this.serialised(req.sandbox_id, async (rec) => {
      await rec.machine.writeFile(req.path, data, req.mode);
      return { path: req.path, bytes: data.length };
    });
  }

  async readFile(req: ReadFileRequest): Promise<{ path: string; content: string; encoding: Encoding; bytes: number }> {
    checkPath(req.path);
    return this.serialised(req.sandbox_id, async (rec) => {
      const data = await rec.machine.readFile(req.path, FILE_LIMIT_BYTES);
      const encoding = req.encoding ?? "utf8";
      return { path: req.path, content: data.toString(encoding), encoding, bytes: data.length };
    });
  }

  list(): { sandboxes: SandboxSummary[] } {
    return {
      sandboxes: [...this.records.values()].map((r) => ({
        sandbox_id: r.id,
        backend: this.backend.kind,
        busy: r.pending > 0,
        created_at: new Date(r.createdAt).toISOString(),
        last_used_at: new Date(r.lastUsedAt).toISOString(),
        memory_mb: r.boot.memoryMb,
        vcpus: r.boot.vcpus,
        disk_mb: r.boot.diskMb,
        timeout_s: r.idleTimeoutS,
      })),
    };
  }

  /** Top the warm pool up (see refillOnCreate). */
  refill(): void {
    this.refillPool();
  }

  /** Is `id` a live sandbox of this registry? */
  has(id: string): boolean {
    return this.records.has(id);
  }

  /** The machine behind a live sandbox (worker sandboxes reach its engine channel through it). */
  machineOf(id: string): SandboxMachine {
    return this.lookup(id).machine;
  }

  /** Destroy a sandbox now; a queued or running request on it fails. `why` ends up in the error a
   * later call on the id gets; `crashed` records it as guest_crashed rather than sandbox_not_found. */
  async destroy(id: string, why = "was destroyed", crashed = false): Promise<{ sandbox_id: string; destroyed: true }> {
    const rec = this.lookup(id);
    this.forget(rec, crashed ? "guest_crashed" : "sandbox_not_found", `sandbox ${id} ${why}`);
    await rec.machine.destroy();
    return { sandbox_id: id, destroyed: true };
  }

  /** Stop taking work and kill every machine: sandboxes, the pool and boots in flight. */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    clearTimeout(this.poolRetry);
    const machines = [...this.records.values()].map((r) => {
      this.forget(r, "host_shutting_down", "the host shut down");
      return r.machine;
    });
    machines.push(...this.pool.splice(0));
    for (const c of this.claims.splice(0)) c(undefined);
    await Promise.all([
      ...machines.map((m) => m.destroy()),
      ...[...this.booting].map(async (b) => (await b.catch(() => undefined))?.destroy()),
    ]);
  }

  private checkOpen(): void {
    if (this.shuttingDown) throw new SandboxError("host_shutting_down", "the host is shutting down");
  }

  private isDefault(b: BootOptions): boolean {
    const d = this.defaultBoot;
    return b.memoryMb === d.memoryMb && b.vcpus === d.vcpus && b.diskMb === d.diskMb;
  }

  /** Boot through the gate; the machine is tracked until the caller owns it. */
  private boot(opts: BootOptions, urgent: boolean): Promise<SandboxMachine> {
    const p = this.gate.run(async () => {
      if (this.shuttingDown) throw new SandboxError("host_shutting_down", "the host is shutting down");
      return this.backend.boot(opts);
    }, urgent);
    const tracked = p.then(
      (m) => m,
      () => undefined,
    );
    this.booting.add(tracked);
    void tracked.finally(() => this.booting.delete(tracked));
    return p;
  }

  private refillPool(): void {
    while (!this.shuttingDown && this.pool.length + this.poolBooting - this.claims.length < this.poolSize) {
      this.poolBooting++;
      this.boot(this.defaultBoot, false).then(
        (m) => {
          this.poolBooting--;
          if (this.shuttingDown) return void m.destroy();
          const claim = this.claims.shift();
          if (claim) return claim(m);
          this.pool.push(m);
          m.exited.then(() => {
            const i = this.pool.indexOf(m);
            if (i >= 0) {
              this.pool.splice(i, 1);
              this.refillPool();
            }
          });
        },
        (e: unknown) => {
          this.poolBooting--;
          this.claims.shift()?.(undefined);
          if (this.shuttingDown) return;
          // Do not spin on a host that cannot boot: retry the pool later.
          this.log(`warm pool boot failed: ${e instanceof Error ? e.message : String(e)}`);
          clearTimeout(this.poolRetry);
          this.poolRetry = setTimeout(() => this.refillPool(), 5_000);
          this.poolRetry.unref();
        },
      );
    }
  }

  private lookup(id: string): Record_ {
    const rec = this.records.get(id);
    if (rec) return rec;
    const t = this.tombstones.get(id);
    if (t) throw new SandboxError(t.code, t.message);
    throw new SandboxError("sandbox_not_found", `no sandbox ${id}`);
  }

  /** Remove a record and remember why, so later calls on the id get a precise error. */
  private forget(rec: Record_, code: SandboxErrorCode, message: string): void {
    if (rec.gone) return;
    rec.gone = true;
    clearTimeout(rec.idleTimer);
    this.records.delete(rec.id);
    this.tombstones.set(rec.id, { code: code === "guest_crashed" ? code : "sandbox_not_found", message });
    if (this.tombstones.size > TOMBSTONES_KEPT) this.tombstones.delete(this.tombstones.keys().next().value as string);
  }

  private armIdle(rec: Record_): void {
    clearTimeout(rec.idleTimer);
    rec.idleTimer = setTimeout(() => {
      if (rec.gone || rec.pending > 0) return;
      this.forget(rec, "sandbox_not_found", `sandbox ${rec.id} was reaped after ${rec.idleTimeoutS} s idle`);
      this.log(`reaped idle sandbox ${rec.id}`);
      void rec.machine.destroy();
    }, rec.idleTimeoutS * 1000);
    rec.idleTimer.unref();
  }

  /** Run `fn` after the sandbox's earlier requests: the agent does one thing at a time. */
  private serialised<T>(id: string, fn: (rec: Record_) => Promise<T>): Promise<T> {
    this.checkOpen();
    const rec = this.lookup(id);
    if (rec.pending > MAX_QUEUED_PER_SANDBOX) {
      throw new SandboxError("limit_exceeded", `sandbox ${id} already has ${rec.pending} requests queued`);
    }
    rec.pending++;
    clearTimeout(rec.idleTimer);
    const run = async (): Promise<T> => {
      if (rec.gone) this.lookup(id); // throws the tombstone's error
      try {
        return await fn(rec);
      } catch (e) {
        if (e instanceof SandboxError && (e.code === "guest_crashed" || e.code === "exec_timeout")) {
          // The machine is dead or was killed for hanging: drop the sandbox with the reason.
          const message =
            e.code === "exec_timeout" ? `sandbox ${id} hung and was destroyed: ${e.message}` : e.message.replace(/^guest_crashed: /, "");
          this.forget(rec, "guest_crashed", message);
          void rec.machine.destroy();
        }
        throw e;
      }
    };
    const p = rec.queue.then(run, run);
    rec.queue = p.catch(() => {});
    return p.finally(() => {
      rec.pending--;
      rec.lastUsedAt = this.now();
      if (rec.pending === 0 && !rec.gone) this.armIdle(rec);
    });
  }
}

function checkPath(p: string): void {
  if (p.length === 0 || p.includes("\0") || p.includes("\n"))
    throw new SandboxError("invalid_argument", "path must be non-empty without NUL or newline");
}

/** Result for the model: bounded, UTF-8, small enough for one engine frame, timeouts as 124. */
export function shapeResult(o: ExecOutcome, durationMs: number): ExecResult {
  let out = clip(o.stdout, OUTPUT_LIMIT_BYTES);
  let err = clip(o.stderr, OUTPUT_LIMIT_BYTES);
  const truncated: { stdout?: true; stderr?: true } = {};
  if (out.length < o.stdout.length) truncated.stdout = true;
  if (err.length < o.stderr.length) truncated.stderr = true;
  const result: ExecResult = {
    exit_code: o.timedOut ? TIMEOUT_EXIT_CODE : o.exitCode,
    stdout: out.toString("utf8"),
    stderr: err.toString("utf8"),
    duration_ms: durationMs,
    timed_out: o.timedOut,
  };
  // Control bytes escape to 6 characters in JSON: shrink the larger stream until the result fits.
  while (Buffer.byteLength(JSON.stringify(result)) > RESULT_JSON_BUDGET_BYTES) {
    if (out.length >= err.length) {
      out = clip(out, Math.floor(out.length / 2));
      truncated.stdout = true;
      result.stdout = out.toString("utf8");
    } else {
      err = clip(err, Math.floor(err.length / 2));
      truncated.stderr = true;
      result.stderr = err.toString("utf8");
    }
  }
  if (truncated.stdout || truncated.stderr) result.truncated = truncated;
  return result;
}
