// CLI: `npm run sandbox-host -- --engine ws://127.0.0.1:8787` (or ENGINE_URL). Chooses a backend,
// kills VMs a crashed predecessor left, connects to the engine as a worker and serves `sandbox::*`
// through sdk-edge's Node client, which reconnects and re-registers by itself. SIGINT/SIGTERM stop
// every VM before exiting.
import os from "node:os";
import { parseArgs } from "node:util";
import type { BackendKind } from "./backends/types.ts";
import { DEFAULT_RECONNECTION, registerWorker } from "@iii-edge/sdk-edge/node";
import { nodeSurface, nodeTracer } from "@iii-edge/sdk-edge/worker-node";
import { registerSandboxFunctions } from "./functions.ts";
import { defaultStateDir } from "./host-state.ts";
import {
  DEFAULT_IDLE_TIMEOUT_S,
  DEFAULT_MAX_CONCURRENT_BOOTS,
  DEFAULT_MAX_MEMORY_MB,
  DEFAULT_MAX_SANDBOXES,
  DEFAULT_POOL_SIZE,
} from "./limits.ts";
import { randomBytes } from "node:crypto";
import {
  DEFAULT_MAX_WORKER_SANDBOXES,
  DEFAULT_WORKER_POOL_SIZE,
  DEFAULT_DISK_MB,
  DEFAULT_VCPUS,
  WORKER_DEFAULT_MEMORY_MB,
} from "./limits.ts";
import { chooseBackend, workerBackendFor } from "./probe.ts";
import { Sandboxes } from "./sandboxes.ts";
import { WORKER_ID_PREFIX } from "./functions.ts";
import { WorkerSandboxes } from "./workers/worker-sandboxes.ts";

const USAGE = `usage: sandbox-host [--engine URL] [options]
  --engine URL          engine WebSocket URL (env ENGINE_URL; default ws://127.0.0.1:8787)
  --backend KIND        auto | microvm-kvm | microvm-tcg | process (env SANDBOX_BACKEND; default auto)
  --pool N              warm VMs kept ready (default ${DEFAULT_POOL_SIZE})
  --max-boots N         concurrent VM boots (default ${DEFAULT_MAX_CONCURRENT_BOOTS})
  --max-sandboxes N     live sandboxes (default ${DEFAULT_MAX_SANDBOXES})
  --max-memory-mb N     cap on one sandbox's memory_mb (default ${DEFAULT_MAX_MEMORY_MB})
  --max-vcpus N         cap on one sandbox's vcpus (default: host cores)
  --idle-timeout-s N    default timeout_s for sandboxes (default ${DEFAULT_IDLE_TIMEOUT_S})
  --state-dir DIR       per-VM state and pidfiles (default $XDG_RUNTIME_DIR or /tmp, /iii-sandbox-host)
  --guest-dir DIR       guest kernel + initramfs (default guest/out, built on first start)
  --name NAME           worker name (default sandbox-host@<hostname>)
  --worker-pool N       warm worker VMs (sandbox::spawn_worker) kept booted with iii-sdk loaded (default ${DEFAULT_WORKER_POOL_SIZE})
  --max-workers N       live worker sandboxes (default ${DEFAULT_MAX_WORKER_SANDBOXES}; 0 turns sandbox::spawn_worker off)
  --reconnect-max-ms N  longest wait between attempts to reach the engine (default ${DEFAULT_RECONNECTION.maxDelayMs}, iii-sdk's);
                        lower it when the host is started before or beside the engine
env: ENGINE_TOKEN (this host's own token, when the engine wants one), AUTH_SECRET (the engine's secret:
     each worker sandbox then gets a token of its own, limited to its prefix)`;

const BACKENDS = ["microvm-kvm", "microvm-tcg", "process"] as const;

function log(msg: string): void {
  process.stderr.write(`[sandbox-host] ${msg}\n`);
}

function int(v: string | undefined, name: string, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      engine: { type: "string" },
      backend: { type: "string" },
      pool: { type: "string" },
      "max-boots": { type: "string" },
      "max-sandboxes": { type: "string" },
      "max-memory-mb": { type: "string" },
      "max-vcpus": { type: "string" },
      "idle-timeout-s": { type: "string" },
      "state-dir": { type: "string" },
      "guest-dir": { type: "string" },
      name: { type: "string" },
      "worker-pool": { type: "string" },
      "max-workers": { type: "string" },
      "reconnect-max-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const engineUrl = values.engine ?? process.env.ENGINE_URL ?? "ws://127.0.0.1:8787";
  const forced = values.backend ?? process.env.SANDBOX_BACKEND ?? "auto";
  if (forced !== "auto" && !(BACKENDS as readonly string[]).includes(forced))
    throw new Error(`--backend must be auto or one of ${BACKENDS.join(", ")}`);
  const stateDir = values["state-dir"] ?? defaultStateDir();

  const { backend, reason } = await chooseBackend({
    stateDir,
    guestDir: values["guest-dir"],
    force: forced === "auto" ? undefined : (forced as BackendKind),
    log,
  });
  log(`backend ${backend.kind} (${reason})`);
  const sandboxes = new Sandboxes({
    backend,
    poolSize: int(values.pool, "pool", DEFAULT_POOL_SIZE),
    maxConcurrentBoots: Math.max(1, int(values["max-boots"], "max-boots", DEFAULT_MAX_CONCURRENT_BOOTS)),
    maxSandboxes: int(values["max-sandboxes"], "max-sandboxes", DEFAULT_MAX_SANDBOXES),
    maxMemoryMb: int(values["max-memory-mb"], "max-memory-mb", DEFAULT_MAX_MEMORY_MB),
    maxVcpus: int(values["max-vcpus"], "max-vcpus", os.availableParallelism()),
    defaultIdleTimeoutS: int(values["idle-timeout-s"], "idle-timeout-s", DEFAULT_IDLE_TIMEOUT_S),
    log,
  });
  await sandboxes.start();

  const engineToken = process.env.ENGINE_TOKEN;
  const client = registerWorker(engineUrl, {
    workerName: values.name ?? `sandbox-host@${os.hostname()}`,
    metadata: { backend: backend.kind, backend_reason: reason, limits: sandboxes.limits, pool_size: sandboxes.poolSize },
    ...(engineToken ? { headers: { Authorization: `Bearer ${engineToken}` } } : {}),
    // The backoff doubles from 1 s up to this cap; a host started before its engine otherwise
    // waits up to the cap after the engine comes up.
    reconnectionConfig: {
      maxDelayMs: Math.max(
        DEFAULT_RECONNECTION.initialDelayMs,
        int(values["reconnect-max-ms"], "reconnect-max-ms", DEFAULT_RECONNECTION.maxDelayMs),
      ),
    },
  });
  client.addConnectionStateListener((state) => log(`engine connection: ${state}`));
  // The worker kit's surface over the client, as every worker registers: (data, ctx) handlers,
  // calls that carry the trace, channels on the engine's address.
  const iii = nodeSurface(client, engineUrl, process.env, nodeTracer(client, "sandbox-host"));

  const maxWorkers = int(values["max-workers"], "max-workers", DEFAULT_MAX_WORKER_SANDBOXES);
  const workerBackend =
    maxWorkers > 0
      ? await workerBackendFor(backend.kind, { stateDir, guestDir: values["guest-dir"], log }).catch((e: unknown) => {
          log(`sandbox workers off: ${e instanceof Error ? e.message : String(e)}`);
          return undefined;
        })
      : undefined;
  let workers: WorkerSandboxes | undefined;
  if (workerBackend) {
    const vms = new Sandboxes({
      backend: workerBackend,
      poolSize: int(values["worker-pool"], "worker-pool", DEFAULT_WORKER_POOL_SIZE),
      bootGate: sandboxes.bootGate,
      refillOnCreate: false,
      maxSandboxes: maxWorkers,
      maxMemoryMb: sandboxes.limits.max_memory_mb,
      maxVcpus: sandboxes.limits.max_vcpus,
      defaultBoot: { memoryMb: WORKER_DEFAULT_MEMORY_MB, vcpus: DEFAULT_VCPUS, diskMb: DEFAULT_DISK_MB },
      newId: () => `${WORKER_ID_PREFIX}${randomBytes(8).toString("hex")}`,
      log,
    });
    await vms.start();
    const ns = /\/ns\/([^/?#]+)/.exec(new URL(engineUrl).pathname)?.[1] ?? "default";
    workers = new WorkerSandboxes({
      vms,
      engineUrl,
      namespace: ns,
      authSecret: process.env.AUTH_SECRET || undefined,
      stateDir,
      log,
      inCatalog: async (prefix, want) => {
        const r = (await iii.trigger({ function_id: "engine::functions::list", payload: { prefix } })) as {
          functions?: { function_id: string }[];
        };
        const have = new Set((r.functions ?? []).map((f) => f.function_id));
        return want.every((id) => have.has(id));
      },
    });
    log(`sandbox workers on (${process.env.AUTH_SECRET ? "a token per sandbox" : "open engine: the relay enforces each prefix"})`);
  } else if (backend.kind === "process") {
    log("sandbox workers off: the process backend has no worker image (they need a VM)");
  }
  const ids = registerSandboxFunctions(iii, sandboxes, { backendReason: reason, log, workers });
  log(`serving ${ids.join(", ")} via ${engineUrl}`);

  let stopping = false;
  const stop = async (signal: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping every VM`);
    // A second signal or a stuck client must not keep VMs alive: the hard deadline exits anyway
    // (QEMU then dies through its parent-death signal).
    setTimeout(() => process.exit(code || 1), 10_000).unref();
    await Promise.all([sandboxes.shutdown(), workers?.shutdown()]).catch((e: unknown) => log(`shutdown: ${String(e)}`));
    await client.shutdown().catch(() => {});
    process.exit(code);
  };
  process.on("SIGINT", () => void stop("SIGINT", 0));
  process.on("SIGTERM", () => void stop("SIGTERM", 0));
  process.on("uncaughtException", (e) => {
    log(`uncaught: ${e.stack ?? e.message}`);
    void stop("uncaughtException", 1);
  });
}

main().catch((e: unknown) => {
  log(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
