// Every bound the sandbox host enforces, with the reason for its value. Host caps (memory, vCPUs,
// sandbox count) are defaults that `main.ts` flags can lower or raise.
import { SANDBOX_MAX_IDLE_TIMEOUT_S, SANDBOX_WORKER_MAX_TIMEOUT_S } from "@iii-edge/protocol/harness";

const KiB = 1024;
const MiB = 1024 * KiB;

/** Bytes kept per output stream (stdout, stderr) of one exec; the rest is counted as truncated.
 * Both streams plus JSON escaping must fit the engine's 1 MiB frame (protocol MAX_FRAME_BYTES),
 * and a model gains nothing from more than a few hundred KiB of log. */
export const OUTPUT_LIMIT_BYTES = 256 * KiB;

/** Budget for the JSON text of one exec result: under the engine's 1 MiB frame with room for the
 * invocation envelope. Output that JSON-escapes badly (control bytes) is trimmed further to fit. */
export const RESULT_JSON_BUDGET_BYTES = 900 * KiB;

/** Largest file write_file accepts and read_file returns. Carried as base64 (4/3 larger) in one
 * engine frame of at most 1 MiB. */
export const FILE_LIMIT_BYTES = 512 * KiB;

/** Largest stdin for one exec, same frame reason as FILE_LIMIT_BYTES. */
export const STDIN_LIMIT_BYTES = 512 * KiB;

/** Longest command line (command plus quoted args, cwd and env) in bytes. */
export const COMMAND_LIMIT_BYTES = 64 * KiB;

/** Default exec deadline: below the engine's default 30 s invocation timeout, so a command that
 * hits it still returns its partial output to a caller that kept the default. */
export const DEFAULT_EXEC_TIMEOUT_MS = 20_000;
/** Longest exec deadline; callers asking for more must also raise their own trigger timeout. */
export const MAX_EXEC_TIMEOUT_MS = 15 * 60_000;

/** How long the host waits past an exec's deadline for the guest agent's answer before it
 * declares the guest hung and kills the VM. Covers the guest's own kill and reap under TCG. */
export const AGENT_GRACE_MS = 5_000;
/** Deadline for write_file / read_file / ping answers from the agent. */
export const AGENT_FILE_TIMEOUT_MS = 30_000;

/** Guest RAM in MiB. The Debian cloud kernel needs 96 to boot (80 does not); 128 leaves room
 * for a small disk. The default is 256 because an idle guest touches the same ~90 MB whatever
 * its size (measured: PSS 226 MB at -m 128, 227 MB at -m 256), so the headroom is free until used. */
export const MIN_MEMORY_MB = 128;
export const DEFAULT_MEMORY_MB = 256;
/** Host cap on one sandbox's RAM (flag --max-memory-mb). */
export const DEFAULT_MAX_MEMORY_MB = 2048;
/** Guest RAM kept out of the disk: kernel (~35 MB), agent buffers (/run, 24 MB) and room for
 * commands. tmpfs pages cannot be evicted, so a disk that could fill the RAM would leave the
 * OOM killer nothing to kill and panic the guest (seen in testing). disk_mb <= memory_mb - this. */
export const GUEST_RESERVED_MB = 96;

export const DEFAULT_VCPUS = 1;

/** The sandbox's disk: one tmpfs holding both /tmp and /root. */
export const DEFAULT_DISK_MB = 64;
export const MIN_DISK_MB = 1;
export const MAX_DISK_MB = 4096;

/** Idle time after which a sandbox is destroyed (its `timeout_s`). */
export const DEFAULT_IDLE_TIMEOUT_S = 300;
/** The contract's bound (protocol/src/harness/sandbox.ts). */
export const MAX_IDLE_TIMEOUT_S = SANDBOX_MAX_IDLE_TIMEOUT_S;

/** Concurrent VM boots. Booting under TCG is CPU-bound (about 1.4 s of CPU each), so more than
 * one per core only makes every boot slower. */
export const DEFAULT_MAX_CONCURRENT_BOOTS = 2;
/** Booted, unclaimed VMs kept ready. One hides the cold boot for the next create on a 2-core box. */
export const DEFAULT_POOL_SIZE = 1;
/** Live sandboxes per host. A TCG VM costs about 150 MB; 32 leaves most of a small host free. */
export const DEFAULT_MAX_SANDBOXES = 32;

/** Requests queued behind the running one on a single sandbox (the agent does one at a time). */
export const MAX_QUEUED_PER_SANDBOX = 8;

/** Deadline for a VM to boot and its agent to say ready. Generous: boots on a busy 2-core CI box
 * under TCG take 2–3 s each, and several may queue. */
export const BOOT_TIMEOUT_MS = 60_000;

/** Env vars per sandbox/exec and their total size. */
export const MAX_ENV_VARS = 256;

/** Crashed/reaped ids remembered so a later call says why the sandbox is gone. */
export const TOMBSTONES_KEPT = 1024;

// ---------------------------------------------------------------- sandbox workers (workers/)

/** Guest RAM of a worker VM. The worker initramfs holds Node (about 107 MB stripped) and is in RAM
 * twice while the kernel unpacks it (the archive, then the files), so 384 is the floor; 512 leaves
 * the worker's heap room. */
export const WORKER_MIN_MEMORY_MB = 384;
export const WORKER_DEFAULT_MEMORY_MB = 512;
/** Idle seconds (no invocation of its functions) after which a worker sandbox is stopped. */
export const WORKER_DEFAULT_IDLE_TIMEOUT_S = 300;
/** Wall-time limit of a worker sandbox, whatever it does. */
export const WORKER_DEFAULT_TIMEOUT_S = 3600;
/** The contract's bound (protocol/src/harness/sandbox.ts). */
export const WORKER_MAX_TIMEOUT_S = SANDBOX_WORKER_MAX_TIMEOUT_S;
/** From the worker's first connection to its functions showing in the catalog. Registering takes
 * well under a second under TCG once iii-sdk is preloaded; 30 s covers a busy 2-core box and a
 * worker that does some set-up first. */
export const WORKER_READY_TIMEOUT_MS = 30_000;
/** From the code being handed over to the worker's first connection to the engine: starting Node
 * on a software CPU is the slow part, and on a loaded box it alone has taken tens of seconds. A
 * script that never connects fails here, with a message that says it never connected. */
export const WORKER_CONNECT_TIMEOUT_MS = 60_000;
/** A worker is taken as registered once this long passes without a new registration frame. */
export const WORKER_SETTLE_MS = 150;
/** The worker's files together, as carried in one frame to the guest (and one engine request). */
export const WORKER_SOURCE_LIMIT_BYTES = 512 * KiB;
export const MAX_WORKER_FILES = 64;
/** Worker VMs kept booted with iii-sdk loaded, waiting for code. */
export const DEFAULT_WORKER_POOL_SIZE = 1;
/** Live worker sandboxes. An idle worker VM costs about 0.6 GB of host memory under TCG. */
export const DEFAULT_MAX_WORKER_SANDBOXES = 8;

/** Frames a sandbox worker may send per second, sustained, and in one burst. A worker registering
 * a few hundred functions at connect fits the burst; a loop flooding the engine does not, and is
 * stopped (its own VM only). */
export const RELAY_FRAMES_PER_SECOND = 200;
export const RELAY_FRAME_BURST = 1000;
/** WebSocket connections a worker VM may hold at once (a worker and a reconnect in flight). */
export const RELAY_MAX_CONNECTIONS = 4;
/** New connections a minute: more is a reconnect loop, and the sandbox is stopped. */
export const RELAY_MAX_OPENS_PER_MINUTE = 30;
/** Largest mux frame from the guest runtime; its TCP reads are 64 KiB. */
export const RELAY_MUX_FRAME_LIMIT = 1 * MiB;
/** How long the relay waits for the engine to accept a worker's upstream connection. */
export const RELAY_UPSTREAM_CONNECT_MS = 10_000;
