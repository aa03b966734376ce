// Maps the registry onto the engine: every `sandbox::*` function with its description and JSON
// Schema formats. The request_format is also what validates the request, so what is published is
// what is enforced. Failures are thrown as SandboxError with its code.
import { openChannelWriter, type ChannelWriter } from "@iii-edge/sdk-edge/channels";
import { withoutCallerId } from "@iii-edge/sdk-edge/client";
import type { EngineClient } from "./engine-client.ts";
import { SandboxError, toSandboxError } from "./errors.ts";
import {
  DEFAULT_DISK_MB,
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_S,
  DEFAULT_MEMORY_MB,
  DEFAULT_VCPUS,
  FILE_LIMIT_BYTES,
  GUEST_RESERVED_MB,
  MAX_ENV_VARS,
  MAX_EXEC_TIMEOUT_MS,
  MAX_IDLE_TIMEOUT_S,
  MIN_MEMORY_MB,
  OUTPUT_LIMIT_BYTES,
  MAX_WORKER_FILES,
  WORKER_DEFAULT_IDLE_TIMEOUT_S,
  WORKER_DEFAULT_MEMORY_MB,
  WORKER_DEFAULT_TIMEOUT_S,
  WORKER_MAX_TIMEOUT_S,
  WORKER_MIN_MEMORY_MB,
  WORKER_SOURCE_LIMIT_BYTES,
} from "./limits.ts";
import { DEFAULT_IMAGE, type OutputChunk, type Sandboxes } from "./sandboxes.ts";
import { validate, type JsonSchema } from "./schema.ts";
import type { SpawnWorkerRequest, WorkerSandboxes } from "./workers/worker-sandboxes.ts";

const sandboxId: JsonSchema = { type: "string", description: "Id returned by sandbox::create (sbx_…).", minLength: 1, maxLength: 64 };
const env: JsonSchema = {
  type: "object",
  description: `Environment variables (at most ${MAX_ENV_VARS}).`,
  additionalProperties: { type: "string" },
};
const encoding: JsonSchema = { type: "string", enum: ["utf8", "base64"], description: "utf8 (default) or base64 for binary data." };
const path: JsonSchema = { type: "string", minLength: 1, maxLength: 4096, description: "Guest path; relative paths are under /root." };

const create = {
  request: {
    type: "object",
    additionalProperties: false,
    properties: {
      image: { type: "string", enum: [DEFAULT_IMAGE], description: "Guest image; only the busybox image exists." },
      memory_mb: {
        type: "integer",
        minimum: 1,
        description: `Guest RAM in MiB (default ${DEFAULT_MEMORY_MB}, at least ${MIN_MEMORY_MB}; the host cap is in sandbox::info).`,
      },
      vcpus: { type: "integer", minimum: 1, description: `Guest vCPUs (default ${DEFAULT_VCPUS}).` },
      disk_mb: {
        type: "integer",
        minimum: 1,
        description: `Disk in MiB: /tmp and /root together (default ${DEFAULT_DISK_MB}; at most memory_mb - ${GUEST_RESERVED_MB}).`,
      },
      timeout_s: {
        type: "integer",
        minimum: 1,
        maximum: MAX_IDLE_TIMEOUT_S,
        description: `Idle seconds before the sandbox is destroyed (default ${DEFAULT_IDLE_TIMEOUT_S}).`,
      },
      env: { ...env, description: "Environment applied to every exec in this sandbox." },
      network: { type: "boolean", description: "Must be false or absent: sandboxes have no network." },
    },
  },
  response: {
    type: "object",
    required: ["sandbox_id", "backend"],
    properties: {
      sandbox_id: sandboxId,
      backend: { type: "string", enum: ["microvm-kvm", "microvm-tcg", "process"] },
      from_pool: { type: "boolean", description: "Served from the warm pool (no boot wait)." },
      boot_ms: { type: "integer" },
      memory_mb: { type: "integer" },
      vcpus: { type: "integer" },
      disk_mb: { type: "integer" },
      timeout_s: { type: "integer" },
    },
  },
} satisfies Record<string, JsonSchema>;

const exec = {
  request: {
    type: "object",
    additionalProperties: false,
    required: ["sandbox_id", "command"],
    properties: {
      sandbox_id: sandboxId,
      command: { type: "string", minLength: 1, description: "Shell command line, run by /bin/sh (busybox) in the guest." },
      args: { type: "array", items: { type: "string" }, maxItems: 4096, description: "Appended to command, each safely single-quoted." },
      stdin: { type: "string", description: "Bytes for the command's stdin." },
      stdin_encoding: encoding,
      cwd: { type: "string", minLength: 1, maxLength: 4096, description: "Working directory (default /root)." },
      env: { ...env, description: "Environment for this command, over the sandbox's env." },
      timeout_ms: {
        type: "integer",
        minimum: 1,
        description: `Deadline (default ${DEFAULT_EXEC_TIMEOUT_MS}, at most ${MAX_EXEC_TIMEOUT_MS}); the command's process group is killed then.`,
      },
      stream: { type: "boolean", description: "Also send output chunks to on_output_function_id while the command runs." },
      on_output_function_id: {
        type: "string",
        minLength: 1,
        description: "Function triggered (void) with {sandbox_id, exec_id, seq, stream, data} per chunk.",
      },
      output_channel: {
        type: "object",
        required: ["channel_id", "access_key", "direction"],
        properties: {
          channel_id: { type: "string", minLength: 1 },
          access_key: { type: "string", minLength: 1 },
          direction: { type: "string", enum: ["write"] },
        },
        description:
          "Writer ref of a channel (engine::channels::create): while the command runs each output chunk is written to it as a JSON text item {stream, data, seq}; the channel ends with the command.",
      },
    },
  },
  response: {
    type: "object",
    required: ["exit_code", "stdout", "stderr", "duration_ms", "timed_out"],
    properties: {
      exit_code: { type: "integer", description: "Exit status; 128+n when killed by signal n; 124 when timed_out." },
      stdout: { type: "string", description: `At most ${OUTPUT_LIMIT_BYTES} bytes (UTF-8).` },
      stderr: { type: "string", description: `At most ${OUTPUT_LIMIT_BYTES} bytes (UTF-8).` },
      duration_ms: { type: "integer" },
      timed_out: { type: "boolean", description: "The deadline killed the command; stdout/stderr hold what it printed before." },
      truncated: {
        type: "object",
        description: "Present when output was cut at the limit.",
        properties: { stdout: { type: "boolean" }, stderr: { type: "boolean" } },
      },
      exec_id: { type: "string", description: "Present when streaming; matches the chunks' exec_id." },
    },
  },
} satisfies Record<string, JsonSchema>;

const writeFile = {
  request: {
    type: "object",
    additionalProperties: false,
    required: ["sandbox_id", "path", "content"],
    properties: {
      sandbox_id: sandboxId,
      path,
      content: { type: "string", description: `File bytes (at most ${FILE_LIMIT_BYTES}); parent directories are created.` },
      encoding,
      mode: { type: "integer", minimum: 0, maximum: 0o7777, description: "Permission bits, e.g. 493 (0o755)." },
    },
  },
  response: { type: "object", required: ["path", "bytes"], properties: { path: { type: "string" }, bytes: { type: "integer" } } },
} satisfies Record<string, JsonSchema>;

const readFile = {
  request: {
    type: "object",
    additionalProperties: false,
    required: ["sandbox_id", "path"],
    properties: { sandbox_id: sandboxId, path, encoding },
  },
  response: {
    type: "object",
    required: ["path", "content", "encoding", "bytes"],
    properties: { path: { type: "string" }, content: { type: "string" }, encoding, bytes: { type: "integer" } },
  },
} satisfies Record<string, JsonSchema>;

const byId = {
  request: { type: "object", additionalProperties: false, required: ["sandbox_id"], properties: { sandbox_id: sandboxId } },
  response: {
    type: "object",
    required: ["sandbox_id", "destroyed"],
    properties: { sandbox_id: sandboxId, destroyed: { type: "boolean" } },
  },
} satisfies Record<string, JsonSchema>;

const fnSummary: JsonSchema = {
  type: "object",
  required: ["function_id"],
  properties: { function_id: { type: "string" }, description: { type: "string" } },
};
const triggerSummary: JsonSchema = {
  type: "object",
  properties: { id: { type: "string" }, trigger_type: { type: "string" }, function_id: { type: "string" } },
};
const list = {
  request: { type: "object", additionalProperties: false, properties: {} },
  response: {
    type: "object",
    required: ["sandboxes"],
    properties: {
      sandboxes: {
        type: "array",
        items: {
          type: "object",
          properties: {
            sandbox_id: sandboxId,
            backend: { type: "string" },
            busy: { type: "boolean" },
            created_at: { type: "string" },
            last_used_at: { type: "string" },
            memory_mb: { type: "integer" },
            vcpus: { type: "integer" },
            disk_mb: { type: "integer" },
            timeout_s: { type: "integer" },
            kind: { type: "string", enum: ["command", "worker"], description: "worker: made by sandbox::spawn_worker." },
            register_prefix: { type: "string" },
            functions: { type: "array", items: fnSummary, description: "Worker sandboxes: the functions it provides now." },
            triggers: { type: "array", items: triggerSummary },
            refused: { type: "array", items: { type: "string" }, description: "Registrations refused by its prefix rule." },
          },
        },
      },
    },
  },
} satisfies Record<string, JsonSchema>;

const info = {
  request: { type: "object", additionalProperties: false, properties: {} },
  response: {
    type: "object",
    required: ["backend", "limits", "pool"],
    properties: {
      backend: { type: "string" },
      backend_reason: { type: "string" },
      limits: { type: "object" },
      pool: { type: "object" },
    },
  },
} satisfies Record<string, JsonSchema>;

const globs = (what: string): JsonSchema => ({
  type: "array",
  maxItems: 64,
  items: { type: "string", minLength: 1, maxLength: 256 },
  description: what,
});

const spawnWorker = {
  request: {
    type: "object",
    additionalProperties: false,
    properties: {
      source: {
        type: "string",
        minLength: 1,
        description:
          'The worker\'s code: one ES module using iii-sdk (`import { registerWorker } from "iii-sdk"`; connect to process.env.III_URL). Written as `entry` (default worker.mjs).',
      },
      files: {
        type: "object",
        additionalProperties: { type: "string" },
        description: `Instead of source: several UTF-8 files, relative path → text (at most ${MAX_WORKER_FILES}, ${WORKER_SOURCE_LIMIT_BYTES} bytes together).`,
      },
      entry: { type: "string", minLength: 1, maxLength: 256, description: "The file Node runs (required with files)." },
      env: { ...env, description: "Environment of the worker process." },
      register_prefix: {
        type: "string",
        minLength: 3,
        maxLength: 128,
        description:
          "Function-id prefix the worker may register under, ending in :: (default <sandbox_id>::). Registrations outside it are refused.",
      },
      idle_timeout_s: {
        type: "integer",
        minimum: 1,
        maximum: MAX_IDLE_TIMEOUT_S,
        description: `Stop after this many seconds without an invocation of its functions (default ${WORKER_DEFAULT_IDLE_TIMEOUT_S}).`,
      },
      timeout_s: {
        type: "integer",
        minimum: 1,
        maximum: WORKER_MAX_TIMEOUT_S,
        description: `Wall-time limit (default ${WORKER_DEFAULT_TIMEOUT_S}).`,
      },
      memory_mb: {
        type: "integer",
        minimum: 1,
        description: `Guest RAM in MiB (default ${WORKER_DEFAULT_MEMORY_MB}, at least ${WORKER_MIN_MEMORY_MB}).`,
      },
      vcpus: { type: "integer", minimum: 1, description: `Guest vCPUs (default ${DEFAULT_VCPUS}).` },
      allow_call: globs("Function-id globs the worker may call besides its own (default none)."),
      allow_bind: globs(
        'Trigger types the worker may bind to its own functions (default every engine trigger type except http: a public route needs ["http"] here).',
      ),
      wait_for: {
        ...globs("Return once these function ids are in the catalog (default: once its registrations settle)."),
        items: { type: "string", minLength: 1, maxLength: 256 },
      },
    },
  },
  response: {
    type: "object",
    required: ["sandbox_id", "register_prefix", "functions"],
    properties: {
      sandbox_id: sandboxId,
      register_prefix: { type: "string" },
      functions: { type: "array", items: fnSummary, description: "Functions the worker registered; callable now." },
      triggers: { type: "array", items: triggerSummary },
      backend: { type: "string" },
      from_pool: { type: "boolean" },
      boot_ms: { type: "integer" },
      ready_ms: { type: "integer", description: "From the code handed over to its functions being in the catalog." },
      timings: {
        type: "object",
        description: "handed_over_at (epoch ms), then running_ms, first_registration_ms, in_catalog_ms after it.",
      },
      memory_mb: { type: "integer" },
      vcpus: { type: "integer" },
      idle_timeout_s: { type: "integer" },
      timeout_s: { type: "integer" },
      auth: { type: "string", enum: ["token", "open"] },
    },
  },
} satisfies Record<string, JsonSchema>;

/** Published formats, exported for tests and docs. */
export const SANDBOX_FORMATS = { create, exec, writeFile, readFile, byId, list, info, spawnWorker };

export interface RegisterOptions {
  /** Why the backend was chosen (from the probe), reported by sandbox::info. */
  backendReason?: string;
  /** The engine's address, for attaching to channels (`output_channel`). */
  engineUrl?: string;
  /** Sandbox workers (sandbox::spawn_worker); absent: not offered. */
  workers?: WorkerSandboxes;
  log?: (msg: string) => void;
}

/** Ids of worker sandboxes (their VM registry's ids). */
export const WORKER_ID_PREFIX = "sbw_";

export function registerSandboxFunctions(client: EngineClient, plain: Sandboxes, opts: RegisterOptions = {}): string[] {
  const log = opts.log ?? (() => {});
  const ids: string[] = [];
  const workers = opts.workers;
  /** The registry a sandbox id belongs to: worker VMs answer exec/files like any sandbox. */
  const registryOf = (id: string): Sandboxes => (workers && id.startsWith(WORKER_ID_PREFIX) ? workers.vms : plain);
  const sandboxes = plain;
  const stop = (id: string) => (workers && id.startsWith(WORKER_ID_PREFIX) ? workers.stop(id) : plain.destroy(id));

  function fn<T>(
    id: string,
    description: string,
    formats: { request: JsonSchema; response: JsonSchema },
    run: (req: T) => Promise<unknown> | unknown,
  ): void {
    ids.push(id);
    client.registerFunction({ id, description, request_format: formats.request, response_format: formats.response }, async (data) => {
      // The engine adds the caller's worker id to object payloads (protocol/README.md §4.6): not input.
      const req = withoutCallerId(data ?? {});
      const problem = validate(formats.request, req);
      if (problem) throw new SandboxError("invalid_argument", problem);
      try {
        return await run(req as T);
      } catch (e) {
        throw toSandboxError(e);
      }
    });
  }

  fn<Parameters<Sandboxes["create"]>[0]>(
    "sandbox::create",
    "Create an isolated sandbox (one microVM: no network, no host files) and return its id.",
    create,
    (req) => sandboxes.create(req),
  );

  fn<Parameters<Sandboxes["exec"]>[0]>(
    "sandbox::exec",
    "Run a shell command in a sandbox; returns exit_code, bounded stdout/stderr, duration_ms and timed_out.",
    exec,
    async (req) => {
      if (req.stream && !req.on_output_function_id && !req.output_channel) {
        throw new SandboxError("invalid_argument", "request.on_output_function_id: required when stream is true (or give output_channel)");
      }
      const target = req.stream ? req.on_output_function_id : undefined;
      const channel = req.output_channel;
      if (channel && !opts.engineUrl)
        throw new SandboxError("invalid_argument", "request.output_channel: this host was started without an engine URL");
      let writer: ChannelWriter | undefined;
      if (channel) {
        writer = await openChannelWriter(opts.engineUrl!, channel).catch((e: unknown) => {
          throw new SandboxError("invalid_argument", `request.output_channel: ${e instanceof Error ? e.message : String(e)}`);
        });
      }
      let seq = 0;
      const onOutput =
        target || writer
          ? (chunk: OutputChunk) => {
              const n = seq++;
              if (target) {
                client
                  .trigger({ function_id: target, payload: { ...chunk, seq: n }, action: { type: "void" } })
                  .catch((e: unknown) => log(`output chunk to ${target} failed: ${e instanceof Error ? e.message : String(e)}`));
              }
              try {
                writer?.write(JSON.stringify({ stream: chunk.stream, data: chunk.data, seq: n }));
              } catch (e) {
                log(`output chunk to channel ${channel?.channel_id} failed: ${e instanceof Error ? e.message : String(e)}`);
              }
            }
          : undefined;
      try {
        return await registryOf(req.sandbox_id).exec(req, onOutput);
      } finally {
        writer?.close();
      }
    },
  );

  fn<Parameters<Sandboxes["writeFile"]>[0]>(
    "sandbox::write_file",
    "Write a file in a sandbox (utf8 or base64 content), creating parent directories.",
    writeFile,
    (req) => registryOf(req.sandbox_id).writeFile(req),
  );

  fn<Parameters<Sandboxes["readFile"]>[0]>("sandbox::read_file", "Read a file from a sandbox as utf8 or base64.", readFile, (req) =>
    registryOf(req.sandbox_id).readFile(req),
  );

  fn<Record<string, never>>(
    "sandbox::list",
    "List this host's live sandboxes; worker sandboxes show the functions they provide.",
    list,
    () => {
      const cmd = plain.list().sandboxes.map((s) => ({ ...s, kind: "command" }));
      if (!workers) return { sandboxes: cmd };
      const byId = new Map(workers.list().map((w) => [w.sandbox_id, w]));
      const vms = workers.vms
        .list()
        .sandboxes.filter((s) => byId.has(s.sandbox_id))
        .map((s) => ({ ...s, ...byId.get(s.sandbox_id)! }));
      return { sandboxes: [...cmd, ...vms] };
    },
  );

  fn<{ sandbox_id: string }>(
    "sandbox::stop",
    "Stop a sandbox: its VM is killed and its files are gone (same as sandbox::destroy). A worker sandbox's functions leave the catalog.",
    byId,
    (req) => stop(req.sandbox_id),
  );

  fn<{ sandbox_id: string }>("sandbox::destroy", "Destroy a sandbox: its VM is killed and its files are gone.", byId, (req) =>
    stop(req.sandbox_id),
  );

  if (workers) {
    fn<SpawnWorkerRequest>(
      "sandbox::spawn_worker",
      "Run worker code (an ES module using iii-sdk) in its own microVM and connect it to the engine: the functions it registers " +
        "(only under register_prefix) are in the catalog when this returns, callable by anyone, and leave it when the sandbox stops, " +
        "crashes, goes idle or reaches its wall time. No network in the VM; its only link is its engine connection.",
      spawnWorker,
      (req) => workers.spawn(req),
    );
    fn<{ sandbox_id: string }>("sandbox::stop_worker", "Stop a worker sandbox: its functions leave the catalog.", byId, (req) =>
      workers.stop(req.sandbox_id),
    );
  }

  fn<Record<string, never>>("sandbox::info", "This host's backend, limits and warm pool.", info, () => ({
    backend: sandboxes.backend.kind,
    backend_reason: opts.backendReason,
    limits: sandboxes.limits,
    pool: { size: sandboxes.poolSize, ...sandboxes.stats },
    ...(workers ? { worker_pool: { size: workers.vms.poolSize, ...workers.vms.stats }, worker_limits: workers.vms.limits } : {}),
  }));

  return ids;
}
