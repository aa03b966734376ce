// The provisioning worker (docs/harness-contracts.md §1.3, §6.5): what a run needs before its first LLM call
// — the system prompt (mode, identity, skills, and the live function catalog), the one
// `agent_trigger` schema, the model's catalog entry, and a sandbox when the run asked for
// isolation. Everything it consults is optional and fails open except the sandbox, which a run that
// asked for isolation must not run without. Web APIs only: the same module runs inside the Worker
// and in Node.
import {
  AGENT_TRIGGER_FUNCTION,
  provisioningPrepareRequest,
  provisioningReleaseRequest,
  type Model,
  type ProvisioningPrepareRequest,
  type ProvisioningPrepareResponse,
  provisioningPrepareResponse,
  provisioningReleaseResponse,
} from "@iii-edge/protocol/harness";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { readCatalog, renderCatalog, type LiveCatalog, type Trigger } from "./catalog.ts";
import { IDENTITY_PREAMBLE, joinLayers, modeParagraph } from "./prompt.ts";
import { acquireSandbox, releaseSandbox } from "./sandbox.ts";
import { renderSkills } from "./skills.ts";
import { isRecord, responseFormat } from "@iii-edge/protocol";

export {
  EXCLUDED_PREFIXES,
  MAX_CATALOG_FUNCTIONS,
  MAX_CATALOG_CHARS,
  MAX_DESCRIPTION_CHARS,
  MAX_ENTRY_CHARS,
  MAX_SCHEMA_CHARS,
} from "./catalog.ts";
export { IDENTITY_PREAMBLE, modeParagraph } from "./prompt.ts";
export { skillPlaceholder, SKILL_TIMEOUT_MS } from "./skills.ts";

export interface ProvisioningConfig {
  /** Skills (`iii://<worker>/<fn>` ids) every run's prompt carries; default none. */
  system_default_skills: string[];
}

/** `models::get`: a catalog read. */
export const MODELS_TIMEOUT_MS = 5_000;
/** Default skills taken from config: the run request's own `skills` has the same bound (50). */
export const MAX_DEFAULT_SKILLS = 50;
/** `directory::skills::download` per namespace, once per process, fire-and-forget (docs/harness-contracts.md
 * §1.3 boot step). */
export const DOWNLOAD_TIMEOUT_MS = 60_000;

type RunRequest = ProvisioningPrepareRequest["run_request"];

/** `SYSTEM_DEFAULT_SKILLS`: a comma-separated list, or a JSON array of ids. */
export function parseSkillList(text: string | undefined): string[] {
  if (!text || text.trim() === "") return [];
  let items: unknown[];
  try {
    const parsed: unknown = JSON.parse(text);
    items = Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    items = text.split(",");
  }
  const ids = items
    .filter((s): s is string => typeof s === "string")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  return [...new Set(ids)].slice(0, MAX_DEFAULT_SKILLS);
}

const boundTrigger =
  (ctx: InvocationContext): Trigger =>
  (functionId, payload, timeoutMs) =>
    ctx.trigger({ function_id: functionId, payload, timeoutMs });

/** `models::get` → the entry, or null when unknown, malformed, or the models worker is absent. */
async function modelMeta(trigger: Trigger, rr: RunRequest, present: Set<string> | null): Promise<Model | null> {
  if (!rr.provider || (present !== null && !present.has("models::get"))) return null;
  try {
    const m = await trigger<unknown>("models::get", { provider: rr.provider, id: rr.model }, MODELS_TIMEOUT_MS);
    return isRecord(m) && typeof m.id === "string" && typeof m.provider === "string" ? (m as unknown as Model) : null;
  } catch {
    return null;
  }
}

const sandboxParagraph = (sandboxId: string) =>
  `# Sandbox\n\nThis run has its own isolated sandbox, \`${sandboxId}\`. Run commands in it with sandbox::exec {"sandbox_id": "${sandboxId}", "command": "…"}, and move files with sandbox::write_file / sandbox::read_file.`;

export function createProvisioning(config: ProvisioningConfig) {
  const defaults = config.system_default_skills.slice(0, MAX_DEFAULT_SKILLS);
  // Namespaces whose skills the directory was asked to cache, by this copy of the worker.
  const downloaded = new Set<string>();

  /** The boot-time skills download (docs/harness-contracts.md §1.3), done on first use (a Worker has no boot
   * moment to call from). */
  function warmDirectory(ctx: InvocationContext, ids: readonly string[], present: Set<string> | null): void {
    if (present !== null && !present.has("directory::skills::download")) return;
    for (const id of ids) {
      const ns = /^iii:\/\/([^/]+)/.exec(id)?.[1];
      if (!ns || downloaded.has(ns)) continue;
      downloaded.add(ns);
      ctx
        .trigger({
          function_id: "directory::skills::download",
          payload: { id: ns },
          action: { type: "void" },
          timeoutMs: DOWNLOAD_TIMEOUT_MS,
        })
        .catch(() => downloaded.delete(ns));
    }
  }

  async function prepare(req: ProvisioningPrepareRequest, ctx: InvocationContext): Promise<ProvisioningPrepareResponse> {
    const trigger = boundTrigger(ctx);
    const rr = req.run_request;
    const override = typeof rr.system_prompt === "string" && rr.system_prompt !== "" ? rr.system_prompt : undefined;
    const skills = [...new Set([...defaults, ...(rr.skills ?? [])])];

    // One listing serves the catalog and tells which optional workers are present.
    const catalog: LiveCatalog = override === undefined ? await readCatalog(trigger) : { registered: null, entries: [], omitted: 0 };
    const present = catalog.registered;
    warmDirectory(ctx, skills, present);
    const sandbox = rr.isolation === true ? acquireSandbox(trigger, req.session_id, rr.sandbox_id) : Promise.resolve(undefined);
    // Nothing below throws, so a created sandbox is never left behind by a failure after it.
    const [meta, skillsText, sandboxId] = await Promise.all([
      modelMeta(trigger, rr, present),
      override === undefined ? renderSkills(trigger, skills, present) : Promise.resolve(undefined),
      sandbox,
    ]);

    const system_prompt =
      override ??
      joinLayers([
        modeParagraph(rr.mode),
        IDENTITY_PREAMBLE,
        skillsText,
        renderCatalog(catalog),
        sandboxId === undefined ? undefined : sandboxParagraph(sandboxId),
      ]);
    const out: ProvisioningPrepareResponse = { system_prompt, function_schemas: [AGENT_TRIGGER_FUNCTION], model_meta: meta };
    if (sandboxId !== undefined) out.sandbox_id = sandboxId;
    return out;
  }

  async function release(req: { session_id: string; sandbox_id?: string | null }, ctx: InvocationContext): Promise<{ ok: true }> {
    if (req.sandbox_id) await releaseSandbox(boundTrigger(ctx), req.sandbox_id);
    return { ok: true };
  }

  return { prepare, release };
}

export const worker: WorkerModule<ProvisioningConfig> = {
  name: "provisioning",
  kernel: true,
  configFrom: (env) => ({
    system_default_skills: parseSkillList(typeof env.SYSTEM_DEFAULT_SKILLS === "string" ? env.SYSTEM_DEFAULT_SKILLS : undefined),
  }),
  register(iii: WorkerSurface, config: ProvisioningConfig) {
    const p = createProvisioning({ system_default_skills: config?.system_default_skills ?? [] });
    iii.registerFunction("provisioning::prepare", (data: ProvisioningPrepareRequest, ctx) => p.prepare(data, ctx), {
      description:
        "Before a run's first LLM call: {session_id, run_request} → {system_prompt, function_schemas: [agent_trigger], model_meta, sandbox_id?} (prompt = mode, identity, skills, live function catalog; a sandbox when run_request.isolation).",
      input: provisioningPrepareRequest,
      response_format: responseFormat(provisioningPrepareResponse),
    });
    iii.registerFunction("provisioning::release", (data: { session_id: string; sandbox_id?: string | null }, ctx) => p.release(data, ctx), {
      description: "After a run: {session_id, sandbox_id?} → {ok: true}; stops the sandbox (best effort).",
      input: provisioningReleaseRequest,
      response_format: responseFormat(provisioningReleaseResponse),
    });
  },
};
export default worker;
