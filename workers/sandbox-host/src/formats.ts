// The JSON Schema formats every `sandbox::*` function publishes as its request_format and
// response_format (the request's is also what validates it: ./functions.ts). Apart from the
// functions, so a test can read them without the host (tests/unit/sandbox-contract.test.ts).
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
  MAX_WORKER_FILES,
  MIN_MEMORY_MB,
  OUTPUT_LIMIT_BYTES,
  WORKER_DEFAULT_IDLE_TIMEOUT_S,
  WORKER_DEFAULT_MEMORY_MB,
  WORKER_DEFAULT_TIMEOUT_S,
  WORKER_MAX_TIMEOUT_S,
  WORKER_MIN_MEMORY_MB,
  WORKER_SOURCE_LIMIT_BYTES,
} from "./limits.ts";
import { DEFAULT_IMAGE } from "./sandboxes.ts";
import type { JsonSchema } from "./schema.ts";

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

/** Published formats, by request/response pair. */
export const SANDBOX_FORMATS = { create, exec, writeFile, readFile, byId, list, info, spawnWorker };
