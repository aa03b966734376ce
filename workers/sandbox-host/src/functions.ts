// Maps the registry onto the engine: every `sandbox::*` function with its description and the
// formats of its contract (./contract.ts: protocol's schemas, which also validate each request, so
// what is published is what is enforced). Failures are thrown as SandboxError with its code.
// Registered through the worker kit's surface (sdk-edge's `WorkerSurface`), as every worker is.
import { withoutCallerId } from "@iii-edge/sdk-edge/client";
import type { ChannelWriter, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { type SandboxFunctionId, type SandboxRequest, formatsOf, parseRequest } from "./contract.ts";
import { SandboxError, toSandboxError } from "./errors.ts";
import type { OutputChunk, Sandboxes } from "./sandboxes.ts";
import type { WorkerSandboxes } from "./workers/worker-sandboxes.ts";

/** What the functions need of the worker kit's surface. */
export type SandboxSurface = Pick<WorkerSurface, "registerFunction" | "trigger" | "channels">;

export interface RegisterOptions {
  /** Why the backend was chosen (from the probe), reported by sandbox::info. */
  backendReason?: string;
  /** Sandbox workers (sandbox::spawn_worker); absent: not offered. */
  workers?: WorkerSandboxes;
  log?: (msg: string) => void;
}

/** Ids of worker sandboxes (their VM registry's ids). */
export const WORKER_ID_PREFIX = "sbw_";

export function registerSandboxFunctions(iii: SandboxSurface, plain: Sandboxes, opts: RegisterOptions = {}): string[] {
  const log = opts.log ?? (() => {});
  const ids: string[] = [];
  const workers = opts.workers;
  /** The registry a sandbox id belongs to: worker VMs answer exec/files like any sandbox. */
  const registryOf = (id: string): Sandboxes => (workers && id.startsWith(WORKER_ID_PREFIX) ? workers.vms : plain);
  const sandboxes = plain;
  const stop = (id: string) => (workers && id.startsWith(WORKER_ID_PREFIX) ? workers.stop(id) : plain.destroy(id));

  function fn<Id extends SandboxFunctionId>(
    id: Id,
    description: string,
    run: (req: SandboxRequest<Id>) => Promise<unknown> | unknown,
  ): void {
    ids.push(id);
    iii.registerFunction(
      id,
      async (data) => {
        // The engine adds the caller's worker id to object payloads (protocol/README.md §4.6): not input.
        const req = parseRequest(id, withoutCallerId(data ?? {}));
        try {
          return await run(req);
        } catch (e) {
          throw toSandboxError(e);
        }
      },
      { description, ...formatsOf(id) },
    );
  }

  fn("sandbox::create", "Create an isolated sandbox (one microVM: no network, no host files) and return its id.", (req) =>
    sandboxes.create(req),
  );

  fn(
    "sandbox::exec",
    "Run a shell command in a sandbox; returns exit_code, bounded stdout/stderr, duration_ms and timed_out.",
    async (req) => {
      if (req.stream && !req.on_output_function_id && !req.output_channel) {
        throw new SandboxError("invalid_argument", "request.on_output_function_id: required when stream is true (or give output_channel)");
      }
      const target = req.stream ? req.on_output_function_id : undefined;
      const channel = req.output_channel;
      let writer: ChannelWriter | undefined;
      if (channel) {
        writer = await iii.channels.openWriter(channel).catch((e: unknown) => {
          throw new SandboxError("invalid_argument", `request.output_channel: ${e instanceof Error ? e.message : String(e)}`);
        });
      }
      let seq = 0;
      const onOutput =
        target || writer
          ? (chunk: OutputChunk) => {
              const n = seq++;
              if (target) {
                iii
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

  fn("sandbox::write_file", "Write a file in a sandbox (utf8 or base64 content), creating parent directories.", (req) =>
    registryOf(req.sandbox_id).writeFile(req),
  );

  fn("sandbox::read_file", "Read a file from a sandbox as utf8 or base64.", (req) => registryOf(req.sandbox_id).readFile(req));

  fn("sandbox::list", "List this host's live sandboxes; worker sandboxes show the functions they provide.", () => {
    const cmd = plain.list().sandboxes.map((s) => ({ ...s, kind: "command" }));
    if (!workers) return { sandboxes: cmd };
    const byId = new Map(workers.list().map((w) => [w.sandbox_id, w]));
    const vms = workers.vms
      .list()
      .sandboxes.filter((s) => byId.has(s.sandbox_id))
      .map((s) => ({ ...s, ...byId.get(s.sandbox_id)! }));
    return { sandboxes: [...cmd, ...vms] };
  });

  fn(
    "sandbox::stop",
    "Stop a sandbox: its VM is killed and its files are gone (same as sandbox::destroy). A worker sandbox's functions leave the catalog.",
    (req) => stop(req.sandbox_id),
  );

  fn("sandbox::destroy", "Destroy a sandbox: its VM is killed and its files are gone.", (req) => stop(req.sandbox_id));

  if (workers) {
    fn(
      "sandbox::spawn_worker",
      "Run worker code (an ES module using iii-sdk) in its own microVM and connect it to the engine: the functions it registers " +
        "(only under register_prefix) are in the catalog when this returns, callable by anyone, and leave it when the sandbox stops, " +
        "crashes, goes idle or reaches its wall time. No network in the VM; its only link is its engine connection.",
      (req) => workers.spawn(req),
    );
    fn("sandbox::stop_worker", "Stop a worker sandbox: its functions leave the catalog.", (req) => workers.stop(req.sandbox_id));
  }

  fn("sandbox::info", "This host's backend, limits and warm pool.", () => ({
    backend: sandboxes.backend.kind,
    backend_reason: opts.backendReason,
    limits: sandboxes.limits,
    pool: { size: sandboxes.poolSize, ...sandboxes.stats },
    ...(workers ? { worker_pool: { size: workers.vms.poolSize, ...workers.vms.stats }, worker_limits: workers.vms.limits } : {}),
  }));

  return ids;
}
