// Maps the registry onto the engine: every `sandbox::*` function with its description and JSON
// Schema formats. The request_format is also what validates the request, so what is published is
// what is enforced. Failures are thrown as SandboxError with its code.
import { openChannelWriter, type ChannelWriter } from "@iii-edge/sdk-edge/channels";
import { withoutCallerId } from "@iii-edge/sdk-edge/client";
import type { EngineClient } from "./engine-client.ts";
import { SandboxError, toSandboxError } from "./errors.ts";
import type { OutputChunk, Sandboxes } from "./sandboxes.ts";
import { SANDBOX_FORMATS } from "./formats.ts";
import { validate, type JsonSchema } from "./schema.ts";
import type { SpawnWorkerRequest, WorkerSandboxes } from "./workers/worker-sandboxes.ts";

/** Published formats, exported for tests and docs (./formats.ts). */
export { SANDBOX_FORMATS };
const { create, exec, writeFile, readFile, byId, list, info, spawnWorker } = SANDBOX_FORMATS;

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
