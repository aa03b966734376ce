// Sandbox workers: a microVM whose guest runs worker code that registers functions with the engine.
// The VMs come from their own registry (a Sandboxes over the worker image, with its own warm pool
// and the host's boot gate); this layer adds the code hand-over, the relay with its token and
// prefix rule, and the lifecycle: the worker's functions leave the catalog when its VM stops,
// crashes, reaches its wall time or goes idle, because the relay's engine connections close then.
// A worker process that exits is not restarted: its sandbox is stopped and remembers why.
import path from "node:path";
import { randomBytes } from "node:crypto";
import { TRIGGER_TYPES } from "@iii-edge/protocol";
import { mintToken } from "@iii-edge/protocol/token";
import { SandboxError } from "../errors.ts";
import {
  MAX_WORKER_FILES,
  WORKER_DEFAULT_IDLE_TIMEOUT_S,
  WORKER_DEFAULT_TIMEOUT_S,
  WORKER_MAX_TIMEOUT_S,
  WORKER_MIN_MEMORY_MB,
  WORKER_CONNECT_TIMEOUT_MS,
  WORKER_READY_TIMEOUT_MS,
  WORKER_SETTLE_MS,
  WORKER_SOURCE_LIMIT_BYTES,
  MAX_IDLE_TIMEOUT_S,
  TOMBSTONES_KEPT,
} from "../limits.ts";
import type { CreateResult, Sandboxes } from "../sandboxes.ts";
import { WorkerRelay, type WorkerExit } from "./relay.ts";

export interface SpawnWorkerRequest {
  /** One ES module: the worker's whole code (written as `entry`, default worker.mjs). */
  source?: string;
  /** Several files, path (relative to the app directory) → UTF-8 text. */
  files?: Record<string, string>;
  entry?: string;
  env?: Record<string, string>;
  register_prefix?: string;
  idle_timeout_s?: number;
  timeout_s?: number;
  memory_mb?: number;
  vcpus?: number;
  /** Function-id globs the worker may call besides its own functions. */
  allow_call?: string[];
  /** Trigger types it may bind, to its own functions only (default SANDBOX_DEFAULT_BIND). */
  allow_bind?: string[];
  /** Wait until these ids are in the catalog (default: whatever it registers, once it settles). */
  wait_for?: string[];
}

/**
 * What a sandbox worker may bind when its spawner names nothing: the engine's trigger types except
 * `http`. A route is served on the engine's own origin to anyone who asks, so code a model wrote
 * publishes one only when the spawner says `allow_bind: ["http", …]`.
 */
export const SANDBOX_DEFAULT_BIND: readonly string[] = Object.values(TRIGGER_TYPES).filter((t) => t !== TRIGGER_TYPES.http);

export interface WorkerFunctionSummary {
  function_id: string;
  description?: string;
}

export interface SpawnWorkerResult {
  sandbox_id: string;
  register_prefix: string;
  functions: WorkerFunctionSummary[];
  triggers: { id: string; trigger_type: string; function_id: string }[];
  backend: string;
  from_pool: boolean;
  boot_ms: number;
  /** From handing over the code to its functions being in the engine's catalog. */
  ready_ms: number;
  /** When the code reached the ready VM (epoch ms), and the steps after it in ms from then:
   * the worker process importing it, its first registration passing the relay, the catalog check. */
  timings: { handed_over_at: number; running_ms?: number; first_registration_ms?: number; in_catalog_ms: number };
  memory_mb: number;
  vcpus: number;
  idle_timeout_s: number;
  timeout_s: number;
  /** "token": the upstream connection carries a token minted for this sandbox; "open": the engine
   * has no AUTH_SECRET and the relay's own checks are the whole guard. */
  auth: "token" | "open";
}

export interface WorkerSummary {
  sandbox_id: string;
  kind: "worker";
  register_prefix: string;
  functions: WorkerFunctionSummary[];
  triggers: { id: string; trigger_type: string; function_id: string }[];
  refused: string[];
  started_at: string;
  last_invoked_at: string;
  idle_timeout_s: number;
  timeout_s: number;
}

export interface WorkerSandboxesOptions {
  /** Registry of worker VMs (booted from the worker image; ids start with sbw_). */
  vms: Sandboxes;
  /** The engine's worker URL the relay dials for each worker connection. */
  engineUrl: string;
  /** The engine's namespace (for the token's grant). */
  namespace: string;
  /** Set: mint a token per sandbox with it (the engine must have the same AUTH_SECRET). */
  authSecret?: string;
  /** Where the relays' unix sockets live. */
  stateDir: string;
  /** Is every id (all under prefix) in the engine's catalog now? (the host's own client asks engine::functions::list) */
  inCatalog: (prefix: string, ids: string[]) => Promise<boolean>;
  log?: (msg: string) => void;
}

/** Prefixes the host or the engine own. */
const RESERVED_PREFIXES = ["engine::", "sandbox::", "iii::", "iii."];
const PREFIX_RE = /^[A-Za-z0-9_.-]+(::[A-Za-z0-9_.-]+)*::$/;
const ENTRY_RE = /^(?!\/)(?!.*(^|\/)\.\.(\/|$))[A-Za-z0-9_./@-]+$/;

interface Entry {
  id: string;
  prefix: string;
  relay: WorkerRelay;
  startedAt: number;
  lastInvokedAt: number;
  idleTimeoutS: number;
  timeoutS: number;
  idleTimer?: ReturnType<typeof setTimeout>;
  deadline?: ReturnType<typeof setTimeout>;
  gone: boolean;
  /** Settles when the worker process exits or the VM stops before spawn returned. */
  failed?: (e: SandboxError) => void;
}

export class WorkerSandboxes {
  readonly vms: Sandboxes;
  private readonly o: WorkerSandboxesOptions;
  private readonly log: (m: string) => void;
  private readonly entries = new Map<string, Entry>();
  /** Prefixes of live and starting sandboxes. */
  private readonly prefixes = new Set<string>();
  private readonly tombstones = new Map<string, SandboxError>();

  constructor(o: WorkerSandboxesOptions) {
    this.vms = o.vms;
    this.o = o;
    this.log = o.log ?? (() => {});
  }

  async spawn(req: SpawnWorkerRequest): Promise<SpawnWorkerResult> {
    const { files, entry } = this.files(req);
    const idleTimeoutS = req.idle_timeout_s ?? WORKER_DEFAULT_IDLE_TIMEOUT_S;
    const timeoutS = req.timeout_s ?? WORKER_DEFAULT_TIMEOUT_S;
    if (timeoutS > WORKER_MAX_TIMEOUT_S) throw new SandboxError("limit_exceeded", `timeout_s is above the cap of ${WORKER_MAX_TIMEOUT_S}`);
    if (req.memory_mb !== undefined && req.memory_mb < WORKER_MIN_MEMORY_MB) {
      throw new SandboxError("invalid_argument", `memory_mb must be at least ${WORKER_MIN_MEMORY_MB} for a worker VM (Node is in its RAM)`);
    }
    const env = req.env ?? {};
    for (const k of Object.keys(env))
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new SandboxError("invalid_argument", `env: bad name ${JSON.stringify(k)}`);
    const prefix = req.register_prefix;
    if (prefix !== undefined) this.checkPrefix(prefix);

    // Reserve the prefix before the first await, so two spawns cannot both take it.
    const provisional = prefix ?? `sbw-${randomBytes(6).toString("hex")}::`;
    this.prefixes.add(provisional);
    let vm;
    try {
      vm = await this.vms.create({ memory_mb: req.memory_mb, vcpus: req.vcpus, timeout_s: MAX_IDLE_TIMEOUT_S });
    } catch (e) {
      this.prefixes.delete(provisional);
      this.vms.refill();
      throw e;
    }
    try {
      return await this.start(req, vm, prefix, provisional, files, entry, env, idleTimeoutS, timeoutS);
    } finally {
      // The pool is topped up once this worker is up: a refill boot would take a core from it.
      this.vms.refill();
    }
  }

  private async start(
    req: SpawnWorkerRequest,
    vm: CreateResult,
    prefix: string | undefined,
    provisional: string,
    files: Record<string, Buffer>,
    entry: string,
    env: Record<string, string>,
    idleTimeoutS: number,
    timeoutS: number,
  ): Promise<SpawnWorkerResult> {
    const id = vm.sandbox_id;
    if (prefix === undefined) {
      // The default prefix names the sandbox, so a caller can tell whose functions they are.
      this.prefixes.delete(provisional);
      prefix = `${id}::`;
      this.prefixes.add(prefix);
    }
    const machine = this.vms.machineOf(id);
    if (!machine.engine) {
      await this.vms.destroy(id);
      this.prefixes.delete(prefix);
      throw new SandboxError("internal_error", "the worker VM has no engine channel (wrong guest image?)");
    }
    let token: string | undefined;
    if (this.o.authSecret) {
      token = await mintToken(
        this.o.authSecret,
        {
          sub: `sandbox-worker:${id}`,
          ns: [this.o.namespace],
          register: [prefix],
          call: [`${prefix}*`, ...(req.allow_call ?? [])],
          bind: req.allow_bind ?? [...SANDBOX_DEFAULT_BIND],
        },
        timeoutS + 60,
      );
    }

    const now = Date.now();
    let settledAt = 0;
    let firstRegistrationAt = 0;
    let runningAt = 0;
    const e: Entry = {
      id,
      prefix,
      relay: undefined as unknown as WorkerRelay,
      startedAt: now,
      lastInvokedAt: now,
      idleTimeoutS,
      timeoutS,
      gone: false,
    };
    e.relay = new WorkerRelay({
      socket: machine.engine.socket,
      listenPath: path.join(this.o.stateDir, `relay-${id.slice(-12)}.sock`),
      engineUrl: this.o.engineUrl,
      token,
      policy: { prefix, call: req.allow_call ?? [], bind: req.allow_bind ?? [...SANDBOX_DEFAULT_BIND] },
      onActivity: () => {
        e.lastInvokedAt = Date.now();
        this.armIdle(e);
      },
      onRegistered: () => {
        settledAt = Date.now();
        firstRegistrationAt ||= settledAt;
      },
      onRunning: () => {
        runningAt = Date.now();
      },
      onExit: (x) => {
        this.log(`sandbox worker ${id} exited (${describeExit(x)}): stopping its VM`);
        void this.stopEntry(
          e,
          new SandboxError(
            "worker_crashed",
            `sandbox worker ${id} exited (${describeExit(x)}); it is not restarted${x.log_tail ? `. Its last output:\n${x.log_tail.slice(-2000)}` : ""}`,
          ),
        );
      },
      onViolation: (why) => {
        this.log(`sandbox worker ${id} stopped: ${why}`);
        void this.stopEntry(e, new SandboxError("limit_exceeded", `sandbox worker ${id} was stopped: ${why}`));
      },
      log: (m) => this.log(`[${id}] ${m}`),
    });
    this.entries.set(id, e);
    void machine.exited.then((x) => {
      if (!e.gone) void this.stopEntry(e, new SandboxError("guest_crashed", `sandbox worker ${id}'s VM exited: ${x.reason}`));
    });
    const failed = new Promise<never>((_, reject) => {
      e.failed = reject;
    });
    failed.catch(() => {});

    await e.relay.ready;
    const handedAt = Date.now();
    e.relay.start({ files, entry, env });
    try {
      await Promise.race([failed, this.untilRegistered(e, req.wait_for, () => settledAt)]);
    } catch (err) {
      const se = err instanceof SandboxError ? err : new SandboxError("internal_error", String(err));
      await this.stopEntry(e, se);
      throw se;
    }
    e.failed = undefined;
    this.armIdle(e);
    e.deadline = setTimeout(() => {
      this.log(`sandbox worker ${id} reached its wall time of ${timeoutS} s`);
      void this.stopEntry(e, new SandboxError("sandbox_not_found", `sandbox worker ${id} was stopped at its wall time of ${timeoutS} s`));
    }, timeoutS * 1000);
    e.deadline.unref();
    const readyAt = Date.now();
    return {
      sandbox_id: id,
      register_prefix: prefix,
      functions: e.relay.functions(),
      triggers: e.relay.triggers(),
      backend: vm.backend,
      from_pool: vm.from_pool,
      boot_ms: vm.boot_ms,
      ready_ms: readyAt - handedAt,
      timings: {
        handed_over_at: handedAt,
        in_catalog_ms: readyAt - handedAt,
        ...(runningAt ? { running_ms: runningAt - handedAt } : {}),
        ...(firstRegistrationAt ? { first_registration_ms: firstRegistrationAt - handedAt } : {}),
      },
      memory_mb: vm.memory_mb,
      vcpus: vm.vcpus,
      idle_timeout_s: idleTimeoutS,
      timeout_s: timeoutS,
      auth: token ? "token" : "open",
    };
  }

  list(): WorkerSummary[] {
    return [...this.entries.values()]
      .filter((e) => !e.gone)
      .map((e) => ({
        sandbox_id: e.id,
        kind: "worker",
        register_prefix: e.prefix,
        functions: e.relay.functions(),
        triggers: e.relay.triggers(),
        refused: e.relay.refused(),
        started_at: new Date(e.startedAt).toISOString(),
        last_invoked_at: new Date(e.lastInvokedAt).toISOString(),
        idle_timeout_s: e.idleTimeoutS,
        timeout_s: e.timeoutS,
      }));
  }

  /** Stop a worker sandbox now: its functions leave the catalog. */
  async stop(id: string): Promise<{ sandbox_id: string; destroyed: true }> {
    const e = this.entries.get(id);
    if (!e) {
      const t = this.tombstones.get(id);
      if (t) throw new SandboxError(t.code === "guest_crashed" || t.code === "worker_crashed" ? t.code : "sandbox_not_found", t.message);
      throw new SandboxError("sandbox_not_found", `no sandbox worker ${id}`);
    }
    await this.stopEntry(e, new SandboxError("sandbox_not_found", `sandbox worker ${id} was stopped`));
    return { sandbox_id: id, destroyed: true };
  }

  async shutdown(): Promise<void> {
    await Promise.all(
      [...this.entries.values()].map((e) => this.stopEntry(e, new SandboxError("host_shutting_down", "the host shut down"))),
    );
    await this.vms.shutdown();
  }

  private async stopEntry(e: Entry, why: SandboxError): Promise<void> {
    if (e.gone) return;
    e.gone = true;
    clearTimeout(e.idleTimer);
    clearTimeout(e.deadline);
    e.relay.close();
    this.entries.delete(e.id);
    this.prefixes.delete(e.prefix);
    this.tombstones.set(e.id, why);
    if (this.tombstones.size > TOMBSTONES_KEPT) this.tombstones.delete(this.tombstones.keys().next().value as string);
    e.failed?.(why);
    if (this.vms.has(e.id)) {
      await this.vms
        .destroy(e.id, why.message.replace(/^sandbox worker \S+ /, ""), why.code === "guest_crashed" || why.code === "worker_crashed")
        .catch(() => {});
    }
  }

  private armIdle(e: Entry): void {
    clearTimeout(e.idleTimer);
    e.idleTimer = setTimeout(() => {
      this.log(`sandbox worker ${e.id} idle for ${e.idleTimeoutS} s: stopping`);
      void this.stopEntry(
        e,
        new SandboxError("sandbox_not_found", `sandbox worker ${e.id} was stopped after ${e.idleTimeoutS} s without an invocation`),
      );
    }, e.idleTimeoutS * 1000);
    e.idleTimer.unref();
  }

  private async untilRegistered(e: Entry, waitFor: string[] | undefined, lastRegistration: () => number): Promise<void> {
    const handedAt = Date.now();
    for (;;) {
      if (e.gone) return;
      const have = e.relay.functions().map((f) => f.function_id);
      const want = waitFor ?? have;
      const settled = waitFor
        ? want.every((id) => have.includes(id))
        : have.length > 0 && Date.now() - lastRegistration() >= WORKER_SETTLE_MS;
      if (settled && (await this.o.inCatalog(e.prefix, want))) return;
      const connectedAt = e.relay.firstOpenAt;
      const upstream = e.relay.lastUpstreamError ? `; ${e.relay.lastUpstreamError}` : "";
      if (connectedAt === undefined && Date.now() - handedAt > WORKER_CONNECT_TIMEOUT_MS)
        throw new SandboxError(
          "worker_not_ready",
          `sandbox worker ${e.id} did not connect to the engine within ${WORKER_CONNECT_TIMEOUT_MS} ms of getting its code${upstream}`,
        );
      if (connectedAt !== undefined && Date.now() - connectedAt > WORKER_READY_TIMEOUT_MS) {
        const missing = want.filter((id) => !have.includes(id));
        const refused = e.relay.refused().length ? `; refused: ${e.relay.refused().join("; ")}` : "";
        throw new SandboxError(
          "worker_not_ready",
          `sandbox worker ${e.id} did not register ${missing.length ? missing.join(", ") : "any function"} within ${WORKER_READY_TIMEOUT_MS} ms of connecting${upstream}${refused}`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private checkPrefix(prefix: string): void {
    if (!PREFIX_RE.test(prefix) || prefix.length > 128) {
      throw new SandboxError(
        "invalid_argument",
        `register_prefix ${JSON.stringify(prefix)} must be segments of letters, digits, _ . - joined by :: and end with :: (e.g. "wordcount::")`,
      );
    }
    if (RESERVED_PREFIXES.some((r) => prefix.startsWith(r)))
      throw new SandboxError("invalid_argument", `register_prefix ${prefix} is reserved`);
    for (const other of this.prefixes) {
      if (prefix.startsWith(other) || other.startsWith(prefix)) {
        throw new SandboxError("invalid_argument", `register_prefix ${prefix} overlaps ${other}, held by another sandbox worker`);
      }
    }
  }

  private files(req: SpawnWorkerRequest): { files: Record<string, Buffer>; entry: string } {
    if ((req.source === undefined) === (req.files === undefined))
      throw new SandboxError("invalid_argument", "give exactly one of source and files");
    const entry = req.entry ?? (req.source !== undefined ? "worker.mjs" : undefined);
    if (!entry) throw new SandboxError("invalid_argument", "entry is required with files");
    const raw = req.source !== undefined ? { [entry]: req.source } : req.files!;
    const names = Object.keys(raw);
    if (names.length > MAX_WORKER_FILES) throw new SandboxError("limit_exceeded", `at most ${MAX_WORKER_FILES} files`);
    let total = 0;
    const files: Record<string, Buffer> = {};
    for (const name of names) {
      if (!ENTRY_RE.test(name) || name.length > 256)
        throw new SandboxError(
          "invalid_argument",
          `file path ${JSON.stringify(name)} must be relative, without .., of letters, digits and _ . / @ -`,
        );
      files[name] = Buffer.from(raw[name]!, "utf8");
      total += files[name]!.length;
    }
    if (total > WORKER_SOURCE_LIMIT_BYTES)
      throw new SandboxError("limit_exceeded", `the worker's files are ${total} bytes; at most ${WORKER_SOURCE_LIMIT_BYTES}`);
    if (!files[entry]) throw new SandboxError("invalid_argument", `entry ${entry} is not among the files`);
    return { files, entry };
  }
}

function describeExit(x: WorkerExit): string {
  if (x.error) return x.error;
  if (x.signal) return `killed by ${x.signal}`;
  return `exit code ${x.code}`;
}
