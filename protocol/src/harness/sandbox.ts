// The sandbox host's contracts (workers/sandbox-host/README.md): `sandbox::*`, isolated microVMs a run's
// calls execute in (`RunRequest.isolation`; provisioning creates one, the model's calls use it).
// Requests are strict: a field the host does not know is refused, not ignored. Defaults and host caps
// (memory, vCPUs, how many sandboxes) are the host's configuration and `sandbox::info` answers them;
// the bounds here are the ones every host holds.
import { z } from "zod";

/** The one guest image a host boots. */
export const SANDBOX_IMAGE = "busybox";
/** Longest idle timeout a sandbox may ask for: a day. */
export const SANDBOX_MAX_IDLE_TIMEOUT_S = 24 * 3600;
/** Longest wall time a worker sandbox may ask for: a day. */
export const SANDBOX_WORKER_MAX_TIMEOUT_S = 24 * 3600;
export const SANDBOX_BACKENDS = ["microvm-kvm", "microvm-tcg", "process"] as const;

const sandboxId = z.string().min(1).max(64).describe("Id returned by sandbox::create (sbx_…).");
const envVars = z.record(z.string(), z.string());
const encoding = z.enum(["utf8", "base64"]).describe("utf8 (default) or base64 for binary data.");
const guestPath = z.string().min(1).max(4096).describe("Guest path; relative paths are under /root.");
const count = z.number().int();
const positive = z.number().int().min(1);
const globs = (what: string) => z.array(z.string().min(1).max(256)).max(64).describe(what);

const functionSummary = z.looseObject({ function_id: z.string(), description: z.string().optional() });
const triggerSummary = z.looseObject({
  id: z.string().optional(),
  trigger_type: z.string().optional(),
  function_id: z.string().optional(),
});

export const sandboxCreateRequest = z.strictObject({
  image: z.literal(SANDBOX_IMAGE).optional().describe("Guest image; only the busybox image exists."),
  memory_mb: positive.optional().describe("Guest RAM in MiB (the host's default and cap: sandbox::info)."),
  vcpus: positive.optional().describe("Guest vCPUs."),
  disk_mb: positive.optional().describe("Disk in MiB: /tmp and /root together."),
  timeout_s: positive.max(SANDBOX_MAX_IDLE_TIMEOUT_S).optional().describe("Idle seconds before the sandbox is destroyed."),
  env: envVars.optional().describe("Environment applied to every exec in this sandbox."),
  network: z.boolean().optional().describe("Must be false or absent: sandboxes have no network."),
});
export const sandboxCreateResponse = z.looseObject({
  sandbox_id: sandboxId,
  backend: z.enum(SANDBOX_BACKENDS),
  from_pool: z.boolean().optional().describe("Served from the warm pool (no boot wait)."),
  boot_ms: count.optional(),
  memory_mb: count.optional(),
  vcpus: count.optional(),
  disk_mb: count.optional(),
  timeout_s: count.optional(),
});

export const sandboxExecRequest = z.strictObject({
  sandbox_id: sandboxId,
  command: z.string().min(1).describe("Shell command line, run by /bin/sh (busybox) in the guest."),
  args: z.array(z.string()).max(4096).optional().describe("Appended to command, each safely single-quoted."),
  stdin: z.string().optional().describe("Bytes for the command's stdin."),
  stdin_encoding: encoding.optional(),
  cwd: z.string().min(1).max(4096).optional().describe("Working directory (default /root)."),
  env: envVars.optional().describe("Environment for this command, over the sandbox's env."),
  timeout_ms: positive.optional().describe("Deadline; the command's process group is killed then."),
  stream: z.boolean().optional().describe("Also send output chunks to on_output_function_id while the command runs."),
  on_output_function_id: z
    .string()
    .min(1)
    .optional()
    .describe("Function triggered (void) with {sandbox_id, exec_id, seq, stream, data} per chunk."),
  output_channel: z
    .looseObject({ channel_id: z.string().min(1), access_key: z.string().min(1), direction: z.literal("write") })
    .optional()
    .describe("Writer ref of a channel: each output chunk is written to it as a JSON text item {stream, data, seq}."),
});
export const sandboxExecResponse = z.looseObject({
  exit_code: count.describe("Exit status; 128+n when killed by signal n; 124 when timed_out."),
  stdout: z.string(),
  stderr: z.string(),
  duration_ms: count,
  timed_out: z.boolean().describe("The deadline killed the command; stdout/stderr hold what it printed before."),
  truncated: z.looseObject({ stdout: z.boolean().optional(), stderr: z.boolean().optional() }).optional(),
  exec_id: z.string().optional().describe("Present when streaming; matches the chunks' exec_id."),
});

export const sandboxWriteFileRequest = z.strictObject({
  sandbox_id: sandboxId,
  path: guestPath,
  content: z.string().describe("File bytes; parent directories are created."),
  encoding: encoding.optional(),
  mode: z.number().int().min(0).max(0o7777).optional().describe("Permission bits, e.g. 493 (0o755)."),
});
export const sandboxWriteFileResponse = z.looseObject({ path: z.string(), bytes: count });

export const sandboxReadFileRequest = z.strictObject({ sandbox_id: sandboxId, path: guestPath, encoding: encoding.optional() });
export const sandboxReadFileResponse = z.looseObject({ path: z.string(), content: z.string(), encoding, bytes: count });

/** `sandbox::stop`, `sandbox::destroy`, `sandbox::stop_worker`. */
export const sandboxIdRequest = z.strictObject({ sandbox_id: sandboxId });
export const sandboxStopResponse = z.looseObject({ sandbox_id: sandboxId, destroyed: z.boolean() });

export const sandboxEmptyRequest = z.strictObject({});
/** One live sandbox of `sandbox::list`. */
export const sandboxSummarySchema = z.looseObject({
  sandbox_id: sandboxId,
  backend: z.string().optional(),
  busy: z.boolean().optional(),
  created_at: z.string().optional(),
  last_used_at: z.string().optional(),
  memory_mb: count.optional(),
  vcpus: count.optional(),
  disk_mb: count.optional(),
  timeout_s: count.optional(),
  kind: z.enum(["command", "worker"]).optional().describe("worker: made by sandbox::spawn_worker."),
  register_prefix: z.string().optional(),
  functions: z.array(functionSummary).optional().describe("Worker sandboxes: the functions it provides now."),
  triggers: z.array(triggerSummary).optional(),
  refused: z.array(z.string()).optional().describe("Registrations refused by its prefix rule."),
});
export const sandboxListResponse = z.looseObject({ sandboxes: z.array(sandboxSummarySchema) });
export const sandboxInfoResponse = z.looseObject({
  backend: z.string(),
  backend_reason: z.string().optional(),
  limits: z.looseObject({}),
  pool: z.looseObject({}),
});

export const sandboxSpawnWorkerRequest = z.strictObject({
  source: z.string().min(1).optional().describe("The worker's code: one ES module using iii-sdk, written as `entry` (default worker.mjs)."),
  files: z.record(z.string(), z.string()).optional().describe("Instead of source: several UTF-8 files, relative path → text."),
  entry: z.string().min(1).max(256).optional().describe("The file Node runs (required with files)."),
  env: envVars.optional().describe("Environment of the worker process."),
  register_prefix: z
    .string()
    .min(3)
    .max(128)
    .optional()
    .describe("Function-id prefix the worker may register under, ending in :: (default <sandbox_id>::)."),
  idle_timeout_s: positive.max(SANDBOX_MAX_IDLE_TIMEOUT_S).optional().describe("Stop after this many seconds without an invocation."),
  timeout_s: positive.max(SANDBOX_WORKER_MAX_TIMEOUT_S).optional().describe("Wall-time limit."),
  memory_mb: positive.optional().describe("Guest RAM in MiB."),
  vcpus: positive.optional().describe("Guest vCPUs."),
  allow_call: globs("Function-id globs the worker may call besides its own (default none).").optional(),
  allow_bind: globs("Trigger types the worker may bind to its own functions (default every one except http).").optional(),
  wait_for: globs("Return once these function ids are in the catalog (default: once its registrations settle).").optional(),
});
export const sandboxSpawnWorkerResponse = z.looseObject({
  sandbox_id: sandboxId,
  register_prefix: z.string(),
  functions: z.array(functionSummary).describe("Functions the worker registered; callable now."),
  triggers: z.array(triggerSummary).optional(),
  backend: z.string().optional(),
  from_pool: z.boolean().optional(),
  boot_ms: count.optional(),
  ready_ms: count.optional().describe("From the code handed over to its functions being in the catalog."),
  timings: z.looseObject({}).optional(),
  memory_mb: count.optional(),
  vcpus: count.optional(),
  idle_timeout_s: count.optional(),
  timeout_s: count.optional(),
  auth: z.enum(["token", "open"]).optional(),
});

/** Request and response of every `sandbox::*` function (`spawn_worker` / `stop_worker`: hosts that
 * run worker sandboxes). */
export const sandboxContracts = {
  "sandbox::create": { request: sandboxCreateRequest, response: sandboxCreateResponse },
  "sandbox::exec": { request: sandboxExecRequest, response: sandboxExecResponse },
  "sandbox::write_file": { request: sandboxWriteFileRequest, response: sandboxWriteFileResponse },
  "sandbox::read_file": { request: sandboxReadFileRequest, response: sandboxReadFileResponse },
  "sandbox::list": { request: sandboxEmptyRequest, response: sandboxListResponse },
  "sandbox::stop": { request: sandboxIdRequest, response: sandboxStopResponse },
  "sandbox::destroy": { request: sandboxIdRequest, response: sandboxStopResponse },
  "sandbox::spawn_worker": { request: sandboxSpawnWorkerRequest, response: sandboxSpawnWorkerResponse },
  "sandbox::stop_worker": { request: sandboxIdRequest, response: sandboxStopResponse },
  "sandbox::info": { request: sandboxEmptyRequest, response: sandboxInfoResponse },
} as const;
export type SandboxFunctionId = keyof typeof sandboxContracts;
export type SandboxRequest<Id extends SandboxFunctionId> = z.input<(typeof sandboxContracts)[Id]["request"]>;
export type SandboxResponse<Id extends SandboxFunctionId> = z.output<(typeof sandboxContracts)[Id]["response"]>;
