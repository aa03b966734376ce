// The `sandbox::*` contracts as this host serves them. The schemas are protocol's, one copy
// (protocol/src/harness/sandbox.ts): the request schema is what validates a call here and what is
// published as its request_format, the response schema its response_format. The host adds only what
// is its own configuration to the published field descriptions: its defaults and caps.
import { formatIssues, requestFormat, responseFormat } from "@iii-edge/protocol";
import { type SandboxFunctionId, type SandboxRequest, sandboxContracts } from "@iii-edge/protocol/harness";
import { SandboxError } from "./errors.ts";
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
  MAX_WORKER_FILES,
  MIN_MEMORY_MB,
  OUTPUT_LIMIT_BYTES,
  WORKER_DEFAULT_IDLE_TIMEOUT_S,
  WORKER_DEFAULT_MEMORY_MB,
  WORKER_DEFAULT_TIMEOUT_S,
  WORKER_MIN_MEMORY_MB,
  WORKER_SOURCE_LIMIT_BYTES,
} from "./limits.ts";

export { sandboxContracts, type SandboxFunctionId, type SandboxRequest };

/** This host's defaults and caps, added to the contract's description of each field. */
const HOST_NOTES: Partial<Record<SandboxFunctionId, { request?: Record<string, string>; response?: Record<string, string> }>> = {
  "sandbox::create": {
    request: {
      memory_mb: `Default ${DEFAULT_MEMORY_MB}, at least ${MIN_MEMORY_MB}.`,
      vcpus: `Default ${DEFAULT_VCPUS}.`,
      disk_mb: `Default ${DEFAULT_DISK_MB}; at most memory_mb - ${GUEST_RESERVED_MB}.`,
      timeout_s: `Default ${DEFAULT_IDLE_TIMEOUT_S}.`,
      env: `At most ${MAX_ENV_VARS} variables.`,
    },
  },
  "sandbox::exec": {
    request: {
      timeout_ms: `Default ${DEFAULT_EXEC_TIMEOUT_MS}, at most ${MAX_EXEC_TIMEOUT_MS}.`,
      env: `At most ${MAX_ENV_VARS} variables.`,
    },
    response: { stdout: `At most ${OUTPUT_LIMIT_BYTES} bytes (UTF-8).`, stderr: `At most ${OUTPUT_LIMIT_BYTES} bytes (UTF-8).` },
  },
  "sandbox::write_file": { request: { content: `At most ${FILE_LIMIT_BYTES} bytes.` } },
  "sandbox::spawn_worker": {
    request: {
      files: `At most ${MAX_WORKER_FILES} files, ${WORKER_SOURCE_LIMIT_BYTES} bytes together.`,
      idle_timeout_s: `Default ${WORKER_DEFAULT_IDLE_TIMEOUT_S}.`,
      timeout_s: `Default ${WORKER_DEFAULT_TIMEOUT_S}.`,
      memory_mb: `Default ${WORKER_DEFAULT_MEMORY_MB}, at least ${WORKER_MIN_MEMORY_MB}.`,
      vcpus: `Default ${DEFAULT_VCPUS}.`,
    },
  },
};

type JsonObject = { properties?: Record<string, { description?: string }> } & Record<string, unknown>;

function withNotes(schema: unknown, notes: Record<string, string> | undefined): JsonObject {
  const out = schema as JsonObject;
  for (const [field, note] of Object.entries(notes ?? {})) {
    const p = out.properties?.[field];
    if (p) p.description = p.description ? `${p.description} ${note}` : note;
  }
  return out;
}

/** What `id` publishes: its contract as JSON Schema, with this host's notes. */
export function formatsOf(id: SandboxFunctionId): { request_format: JsonObject; response_format: JsonObject } {
  const c = sandboxContracts[id];
  return {
    request_format: withNotes(requestFormat(c.request), HOST_NOTES[id]?.request),
    response_format: withNotes(responseFormat(c.response), HOST_NOTES[id]?.response),
  };
}

/** A call's request, checked against its contract; a refusal is `invalid_argument` naming the
 * field (`request.memory_mb: …`), and the handler never sees what the contract refuses. */
export function parseRequest<Id extends SandboxFunctionId>(id: Id, data: unknown): SandboxRequest<Id> {
  const parsed = sandboxContracts[id].request.safeParse(data);
  if (parsed.success) return parsed.data as SandboxRequest<Id>;
  const issues = parsed.error.issues.map((i) => ({ ...i, path: ["request", ...i.path] }));
  throw new SandboxError("invalid_argument", formatIssues({ issues }));
}
